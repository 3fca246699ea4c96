package podwebhook

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/progress-planner/planner/pkg/progressendpoint"
)

// Names the webhook and its pods share.
const (
	// OptInLabel, with the value OptInValue, turns the webhook on for the
	// job pods of a namespace (on the namespace) or of one job (on its
	// pod template, so on its pods).
	OptInLabel = "planner.progress.io/progress-endpoint"
	OptInValue = "enabled"
	// CAAnnotation on a pod holds the endpoint's CA bundle (PEM, public),
	// which the CA volume projects into a file (the downward API): the
	// pod carries its own copy, so nothing has to be written into the
	// tenant's namespace before its pods start.
	CAAnnotation = "planner.progress.io/progress-endpoint-ca"
	// Path the webhook is served at.
	Path = "/mutate-v1-pod"

	EnvURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"

	TokenVolume = "progress-planner-token"
	CAVolume    = "progress-planner-ca"
	tokenDir    = "/var/run/secrets/progress-planner/token"
	caDir       = "/var/run/secrets/progress-planner/ca"
	tokenFile   = "token"

	// DefaultTokenExpirationSeconds: the kubelet refreshes the token at 80 %
	// of this; an hour bounds what a leaked token is good for.
	DefaultTokenExpirationSeconds = 3600
)

// Options say where the pods are pointed.
type Options struct {
	// BaseURL of the endpoint's Service, e.g.
	// https://progress-planner-progress.planner-system.svc:443.
	BaseURL string
	// Audience of the projected token (progressEndpoint.audience).
	Audience string
	// TokenExpirationSeconds of the projected token (default 1 hour, at
	// least 600 as the API requires).
	TokenExpirationSeconds int64
	// CABundle is the endpoint's CA (PEM) the pods trust; required.
	CABundle []byte
}

// Job names the job a pod reports for: its API group and kind (as
// progressendpoint.StatusPath takes them) and name, in the pod's namespace.
type Job struct {
	schema.GroupKind
	Name string
}

// Mutate points every container of pod, in namespace ns, at job's status
// path. A variable or volume the pod already has is left as it is, so
// Mutate is idempotent and a container's own settings win; the CA
// annotation is always the planner's (the CA volume reads it). It reports
// whether pod changed.
func Mutate(pod *corev1.Pod, ns string, job Job, o Options) (bool, error) {
	path, err := progressendpoint.StatusPath(job.GroupKind, ns, job.Name)
	if err != nil {
		return false, fmt.Errorf("status path of %s %s/%s: %w", job.GroupKind, ns, job.Name, err)
	}
	if len(o.CABundle) == 0 {
		return false, errors.New("the endpoint's CA bundle is not loaded yet")
	}
	if o.TokenExpirationSeconds == 0 {
		o.TokenExpirationSeconds = DefaultTokenExpirationSeconds
	}
	env := []corev1.EnvVar{
		{Name: EnvURL, Value: strings.TrimSuffix(o.BaseURL, "/") + path},
		{Name: EnvCACert, Value: caDir + "/" + progressendpoint.KeyCACert},
		{Name: EnvToken, Value: tokenDir + "/" + tokenFile},
	}
	mounts := []corev1.VolumeMount{
		{Name: TokenVolume, MountPath: tokenDir, ReadOnly: true},
		{Name: CAVolume, MountPath: caDir, ReadOnly: true},
	}
	changed := false
	if pod.Annotations[CAAnnotation] != string(o.CABundle) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[CAAnnotation] = string(o.CABundle)
		changed = true
	}
	// A projected token needs a named ServiceAccount. The ServiceAccount
	// admission plugin names "default" before webhooks run; where it is off
	// (envtest), name it the same way rather than make the pod invalid.
	if pod.Spec.ServiceAccountName == "" && pod.Spec.DeprecatedServiceAccount == "" {
		pod.Spec.ServiceAccountName = "default"
		changed = true
	}
	for _, v := range volumes(o) {
		if !hasVolume(pod.Spec.Volumes, v.Name) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
			changed = true
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if mutateContainer(&cs[i], env, mounts) {
				changed = true
			}
		}
	}
	return changed, nil
}

// volumes are the token (bound to the pod, the endpoint's audience) and
// the CA bundle from the pod's own annotation.
func volumes(o Options) []corev1.Volume {
	return []corev1.Volume{
		{Name: TokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: o.Audience, ExpirationSeconds: ptr.To(o.TokenExpirationSeconds), Path: tokenFile,
			}}},
		}}},
		{Name: CAVolume, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{
				Path:     progressendpoint.KeyCACert,
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + CAAnnotation + "']"},
			}},
		}}},
	}
}

func mutateContainer(c *corev1.Container, env []corev1.EnvVar, mounts []corev1.VolumeMount) bool {
	changed := false
	for _, e := range env {
		if !hasEnv(c.Env, e.Name) {
			c.Env = append(c.Env, e)
			changed = true
		}
	}
	for _, m := range mounts {
		if !hasMount(c.VolumeMounts, m) {
			c.VolumeMounts = append(c.VolumeMounts, m)
			changed = true
		}
	}
	return changed
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasEnv(es []corev1.EnvVar, name string) bool {
	for _, e := range es {
		if e.Name == name {
			return true
		}
	}
	return false
}

// hasMount: a mount of the same volume or at the same path (a second
// mount at one path would make the pod invalid).
func hasMount(ms []corev1.VolumeMount, m corev1.VolumeMount) bool {
	for _, x := range ms {
		if x.Name == m.Name || x.MountPath == m.MountPath {
			return true
		}
	}
	return false
}
