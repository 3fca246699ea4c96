// Package podwebhook is a mutating admission webhook that points the pods
// of opted-in jobs at the progress endpoint (pkg/progressendpoint): it
// gives every container the three KUBEFLOW_TRAINER_SERVER_* variables, a
// projected ServiceAccount token with the endpoint's audience and the
// endpoint's CA bundle, so a Trainer-style reporter in the pod posts to
// the planner unchanged.
//
// A namespace opts in with the label OptInLabel=OptInValue, a single job
// with the same label on its pod template. The CA bundle reaches the pod
// in its own annotation (CAAnnotation), projected into a file by the
// downward API, so nothing is written into the tenant's namespace.
// CAInjector keeps the MutatingWebhookConfiguration's caBundle set, the
// way Kueue and cert-manager inject a CA. The webhook fails open (failurePolicy Ignore): with it down, pods
// are still admitted, only without the variables. docs/progress-sources.md
// ("Opting a namespace in") describes it.
package podwebhook
