// Package podwebhook is a mutating admission webhook that points the pods
// of opted-in jobs at the progress endpoint (pkg/progressendpoint): it
// gives every container the three KUBEFLOW_TRAINER_SERVER_* variables, a
// projected ServiceAccount token with the endpoint's audience and the
// endpoint's CA bundle, so a Trainer-style reporter in the pod posts to
// the planner unchanged.
//
// A namespace opts in with the label OptInLabel=OptInValue. The CA bundle
// reaches the pod through a ConfigMap (CAConfigMapName) that CAInjector
// keeps in every opted-in namespace, the way Kueue and cert-manager inject
// a CA; the same loop keeps the MutatingWebhookConfiguration's caBundle
// set. The webhook fails open (failurePolicy Ignore): with it down, pods
// are still admitted, only without the variables. docs/progress-sources.md
// ("Opting a namespace in") describes it.
package podwebhook
