// Package progressendpoint accepts authenticated progress reports over
// HTTPS. It speaks Kubeflow Trainer's KEP-2779 status-server protocol (the
// same path per job, the same {"trainerStatus": {...}} body, the same
// environment variables in the job's pods), so Hugging Face Transformers'
// KubeflowTrainerCallback and the Kubeflow SDK's update_trainjob_status
// report to the planner unchanged once their environment points here.
//
// A report is accepted only when the bearer token passes a TokenReview
// with the planner's audience, the token is bound to a pod, and that pod
// belongs, through its controller owner chain, to the job named in the
// path. Accepted reports are validated with the Trainer's rules and the
// planner's own (pkg/progress) and handed to a Sink. The package also
// manages the endpoint's TLS certificate (certs.go). docs/progress-sources.md
// ("The progress endpoint") describes the protocol and the trust model.
package progressendpoint
