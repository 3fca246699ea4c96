package podwebhook

import (
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Webhook names in the configuration: one per way of opting in.
const (
	// WebhookName serves the job pods of opted-in namespaces.
	WebhookName = "pods.progress-endpoint.planner.progress.io"
	// JobWebhookName serves the pods of opted-in jobs in other namespaces
	// (a pod is sent to one of the two, never both).
	JobWebhookName = "jobpods.progress-endpoint.planner.progress.io"
)

// Configuration is the MutatingWebhookConfiguration for the webhook at cc
// (the chart's template is the same). Its caBundles are left to
// CAInjector.
//   - failurePolicy Ignore: the webhook only adds settings, so with it down
//     pods are admitted unchanged rather than blocked;
//   - the selectors send only pods that opted in, by their namespace's
//     label or by their own (the job's pod template), so other namespaces'
//     pods never wait on it; which job a pod belongs to is the handler's
//     question (the kinds' pod labels differ, and a selector cannot say
//     "one of these labels");
//   - reinvocationPolicy IfNeeded: a later webhook adding a container gets
//     the settings too.
func Configuration(name string, cc admissionregv1.WebhookClientConfig) *admissionregv1.MutatingWebhookConfiguration {
	optedIn := map[string]string{OptInLabel: OptInValue}
	byNamespace := baseWebhook(WebhookName, cc)
	byNamespace.NamespaceSelector = &metav1.LabelSelector{MatchLabels: optedIn}
	byJob := baseWebhook(JobWebhookName, cc)
	byJob.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: OptInLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{OptInValue},
	}}}
	byJob.ObjectSelector = &metav1.LabelSelector{MatchLabels: optedIn}
	return &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregv1.MutatingWebhook{byNamespace, byJob},
	}
}

// baseWebhook is one webhook of the configuration without its selectors.
func baseWebhook(name string, cc admissionregv1.WebhookClientConfig) admissionregv1.MutatingWebhook {
	return admissionregv1.MutatingWebhook{
		Name:         name,
		ClientConfig: cc,
		Rules: []admissionregv1.RuleWithOperations{{
			Operations: []admissionregv1.OperationType{admissionregv1.Create},
			Rule: admissionregv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregv1.NamespacedScope),
			},
		}},
		FailurePolicy:           ptr.To(admissionregv1.Ignore),
		SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](5),
		ReinvocationPolicy:      ptr.To(admissionregv1.IfNeededReinvocationPolicy),
		AdmissionReviewVersions: []string{"v1"},
	}
}
