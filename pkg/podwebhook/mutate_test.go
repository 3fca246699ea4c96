package podwebhook

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var testOpts = Options{BaseURL: "https://progress.planner-system.svc:443", Audience: "progress-planner", TokenExpirationSeconds: 1800, CABundle: []byte("PEM")}

func trainPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "fetch"}},
		Containers:     []corev1.Container{{Name: "train"}, {Name: "sidecar"}},
	}}
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func TestMutateBatchJob(t *testing.T) {
	pod := trainPod()
	changed, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "batch", Kind: "Job"}, Name: "sweep"}, testOpts)
	if err != nil || !changed {
		t.Fatalf("Mutate = %v, %v; want changed", changed, err)
	}
	want := map[string]string{
		EnvURL:    "https://progress.planner-system.svc:443/apis/batch/v1/namespaces/tenant/jobs/sweep/status",
		EnvCACert: "/var/run/secrets/progress-planner/ca/ca.crt",
		EnvToken:  "/var/run/secrets/progress-planner/token/token",
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if got := envOf(c); !reflect.DeepEqual(got, want) {
			t.Errorf("container %s env = %v, want %v", c.Name, got, want)
		}
		if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].Name != TokenVolume || c.VolumeMounts[1].Name != CAVolume {
			t.Errorf("container %s mounts = %+v", c.Name, c.VolumeMounts)
		}
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q, want the default the token is for", pod.Spec.ServiceAccountName)
	}
	if len(pod.Spec.Volumes) != 2 {
		t.Fatalf("volumes = %+v", pod.Spec.Volumes)
	}
	tok := pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken
	if tok.Audience != "progress-planner" || *tok.ExpirationSeconds != 1800 || tok.Path != "token" {
		t.Errorf("token projection = %+v", tok)
	}
	if d := pod.Spec.Volumes[1].DownwardAPI; d == nil || d.Items[0].Path != "ca.crt" ||
		d.Items[0].FieldRef.FieldPath != "metadata.annotations['planner.progress.io/progress-endpoint-ca']" {
		t.Errorf("CA volume = %+v", pod.Spec.Volumes[1])
	}
	if pod.Annotations[CAAnnotation] != "PEM" {
		t.Errorf("CA annotation = %q", pod.Annotations[CAAnnotation])
	}
}

// The CA annotation is the planner's even when the pod came with one: the
// CA volume reads it, and a container that trusts another CA sets its own
// KUBEFLOW_TRAINER_SERVER_CA_CERT instead.
func TestMutateOwnsTheCAAnnotation(t *testing.T) {
	pod := trainPod()
	pod.Annotations = map[string]string{CAAnnotation: "a tenant's CA", "other": "kept"}
	if _, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "batch", Kind: "Job"}, Name: "sweep"}, testOpts); err != nil {
		t.Fatal(err)
	}
	if pod.Annotations[CAAnnotation] != "PEM" || pod.Annotations["other"] != "kept" {
		t.Errorf("annotations = %v", pod.Annotations)
	}
	noCA := testOpts
	noCA.CABundle = nil
	if _, err := Mutate(trainPod(), "tenant", Job{GroupKind: schema.GroupKind{Group: "batch", Kind: "Job"}, Name: "sweep"}, noCA); err == nil {
		t.Error("no error without a CA bundle")
	}
}

func TestMutateIdempotent(t *testing.T) {
	pod := trainPod()
	if _, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, Name: "llama"}, testOpts); err != nil {
		t.Fatal(err)
	}
	once := pod.DeepCopy()
	changed, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, Name: "llama"}, testOpts)
	if err != nil || changed || !reflect.DeepEqual(pod, once) {
		t.Errorf("second Mutate changed the pod (%v, %v)", changed, err)
	}
}

func TestMutateKeepsContainersOwnSettings(t *testing.T) {
	pod := trainPod()
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvURL, Value: "https://own"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/var/run/secrets/progress-planner/ca"}}
	if _, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}, Name: "tj"}, testOpts); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if got := envOf(c)[EnvURL]; got != "https://own" {
		t.Errorf("own URL replaced: %q", got)
	}
	if len(c.Env) != 3 || len(c.VolumeMounts) != 2 || c.VolumeMounts[0].Name != "own" {
		t.Errorf("train container = %+v", c)
	}
	if got := envOf(pod.Spec.Containers[1])[EnvURL]; got != "https://progress.planner-system.svc:443/apis/trainer.kubeflow.org/v1alpha1/namespaces/tenant/trainjobs/tj/status" {
		t.Errorf("sidecar URL = %q", got)
	}
}

func TestMutateUnknownGroup(t *testing.T) {
	pod := trainPod()
	if _, err := Mutate(pod, "tenant", Job{GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}, Name: "x"}, testOpts); err == nil {
		t.Fatal("no error for a group without a status path")
	}
	if !reflect.DeepEqual(pod, trainPod()) {
		t.Error("pod changed on error")
	}
}
