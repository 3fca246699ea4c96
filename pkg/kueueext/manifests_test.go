package kueueext

import (
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
)

// The manifests in config/ are checked here for what a reviewer would
// check by hand: the shipped config is valid, the Deployment is locked
// down and probed, and RBAC grants what the code uses and nothing more.

func readManifest(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile("../../config/" + path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestShippedConfig(t *testing.T) {
	c, err := plannerconfig.LoadConfig("../../config/manager/planner-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.LeaderElection.Enabled || c.Policy.Mode != preempt.ModeAdvise {
		t.Errorf("shipped config: leader election %v, mode %q", c.LeaderElection.Enabled, c.Policy.Mode)
	}
}

func TestDeploymentManifest(t *testing.T) {
	var d appsv1.Deployment
	readManifest(t, "manager/manager.yaml", &d)
	ps := d.Spec.Template.Spec
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
		ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod securityContext %+v", ps.SecurityContext)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	if !slices.Contains(c.Args, "run") || !slices.Contains(c.Args, "--config=/etc/planner/config.yaml") {
		t.Errorf("args %v", c.Args)
	}
	// The shipped config's listeners: on the ports the Deployment names,
	// and reachable from the kubelet (probes) and the metrics Service, so
	// not on loopback, which the defaults use.
	shipped, err := plannerconfig.LoadConfig("../../config/manager/planner-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Ports {
		want := map[string]string{"metrics": shipped.Metrics.BindAddress, "health": shipped.Health.BindAddress}[p.Name]
		if want == "" || !strings.HasSuffix(want, ":"+strconv.Itoa(int(p.ContainerPort))) {
			t.Errorf("port %s %d does not match the shipped bind address %q", p.Name, p.ContainerPort, want)
		}
		host, _, _ := net.SplitHostPort(want)
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			t.Errorf("port %s: the shipped bind address %q is loopback; the kubelet and Prometheus cannot reach it", p.Name, want)
		}
	}
	for _, ep := range []string{plannerconfig.DefaultConfig().Metrics.BindAddress, plannerconfig.DefaultConfig().Health.BindAddress} {
		if host, _, _ := net.SplitHostPort(ep); !net.ParseIP(host).IsLoopback() {
			t.Errorf("default bind address %q is not loopback", ep)
		}
	}
}

func TestClusterRoleLeastPrivilege(t *testing.T) {
	var r rbacv1.ClusterRole
	readManifest(t, "rbac/role.yaml", &r)
	allowed := map[string][]string{}
	for _, rule := range r.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("wildcard in rule %+v", rule)
					}
					allowed[g+"/"+res] = append(allowed[g+"/"+res], v)
				}
			}
		}
	}
	need := map[string][]string{
		"kueue.x-k8s.io/workloads":                     {"get", "list", "watch", "patch"},
		"kueue.x-k8s.io/localqueues":                   {"get", "list", "watch"},
		"kueue.x-k8s.io/clusterqueues":                 {"get", "list"}, // the report page's quotas (pkg/reportui)
		"planner.progress.io/progressforecasts":        {"get", "list", "watch", "create", "delete"},
		"planner.progress.io/progressforecasts/status": {"get", "update", "patch"}, // patch: the admission estimate (pkg/admissionstatus)
		"events.k8s.io/events":                         {"create", "patch"},
	}
	// Every built job kind is read, and never written.
	for _, k := range jobframework.Resources() {
		need[k.Group+"/"+k.Resource] = []string{"get", "list", "watch"}
	}
	for res, verbs := range need {
		got := allowed[res]
		slices.Sort(got)
		want := slices.Clone(verbs)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: verbs %v, want exactly %v", res, got, want)
		}
		delete(allowed, res)
	}
	if len(allowed) > 0 {
		t.Errorf("rules beyond what the planner uses: %v", allowed)
	}
}
