//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/preempt"
	"github.com/progress-planner/planner/test/framework"
)

// Installation (docs/install.md): the Helm chart's renders installed with
// server-side apply, and the secure metrics endpoint (docs/observability.md).

// serverSideApply applies objs as `kubectl apply --server-side` would,
// namespaces, CRDs and ServiceAccounts first, and waits until the
// ProgressForecast CRD is served.
func serverSideApply(ctx context.Context, t *testing.T, env *framework.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	order := map[string]int{"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2}
	rank := func(u *unstructured.Unstructured) int {
		if o, ok := order[u.GetKind()]; ok {
			return o
		}
		return 9
	}
	objs = slices.Clone(objs) // the caller's slice keeps its order
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	var names []string
	for _, u := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		names = append(names, u.GetKind()+" "+u.GetName())
	}
	t.Logf("applied %d objects: %s", len(objs), strings.Join(names, ", "))
	c, err := client.New(env.Config, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &v1alpha1.ProgressForecastList{}) == nil, nil
	}); err != nil {
		t.Fatalf("ProgressForecast CRD not served: %v", err)
	}
}

// chartRender reads a golden `helm template` of the chart
// (release/charts/testdata, kept equal to the chart by release/charts'
// tests) as objects.
func chartRender(t *testing.T, golden string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../../release/charts/testdata/" + golden)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", golden, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && (name == "" || u.GetName() == name) {
			return u
		}
	}
	return nil
}

// asServiceAccount returns a config that impersonates ns/sa and counts the
// requests the API server forbids.
func asServiceAccount(env *framework.Env, ns, sa string, forbidden *atomic.Int64, last *atomic.Value) *rest.Config {
	rc := rest.CopyConfig(env.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return forbiddenCounter{rt: rt, count: forbidden, last: last}
	})
	return rc
}

// chartConfig is the planner config from the render's ConfigMap, with the
// e2e suite's timings (as scenario 9 does with the shipped config).
func chartConfig(t *testing.T, objs []*unstructured.Unstructured, ns string) plannerconfig.Config {
	t.Helper()
	var cmObj *unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "-config") {
			cmObj = u
		}
	}
	if cmObj == nil {
		t.Fatal("no config ConfigMap in the render")
	}
	data, _, _ := unstructured.NestedString(cmObj.Object, "data", "config.yaml")
	cfg, err := plannerconfig.ParseConfig([]byte(data))
	if err != nil {
		t.Fatalf("the chart's config: %v", err)
	}
	if !cfg.LeaderElection.Enabled {
		t.Error("the chart's config has leader election off")
	}
	cfg.LeaderElection.Namespace = ns // POD_NAMESPACE in the Deployment
	tc := testConfig()
	cfg.Metrics, cfg.Health, cfg.CRDCheckInterval, cfg.Forecast = tc.Metrics, tc.Health, tc.CRDCheckInterval, tc.Forecast
	cfg.Policy.Evidence.MinAge, cfg.Policy.Stability.MinDwell = tc.Policy.Evidence.MinAge, tc.Policy.Stability.MinDwell
	return cfg
}

// TestChartInstallDefault: the chart rendered with default values installs
// with server-side apply, and the planner, under the chart's ServiceAccount
// with the chart's config (switched to enforce: the chart defaults to
// advise), writes a plateaued job's boost, its status and Events without a
// single forbidden request (like scenario 9 for config/default).
func TestChartInstallDefault(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := framework.Start(t)
	const ns, sa = "progress-planner-system", "progress-planner"
	objs := chartRender(t, "progress-planner-default.yaml")
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	serverSideApply(ctx, t, env, append(objs, nsObj)) // helm install --create-namespace
	for _, want := range []struct{ kind, name string }{{"Deployment", sa}, {"PodDisruptionBudget", sa}, {"Service", sa + "-metrics"},
		{"ServiceAccount", sa}, {"ClusterRole", sa + "-metrics-reader"}} {
		rendered := findObject(objs, want.kind, want.name)
		if rendered == nil {
			t.Errorf("the default render has no %s %s", want.kind, want.name)
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(rendered.GetAPIVersion())
		u.SetKind(want.kind)
		key := client.ObjectKey{Namespace: ns, Name: want.name}
		if want.kind == "ClusterRole" {
			key.Namespace = ""
		}
		if err := env.Client.Get(ctx, key, u); err != nil {
			t.Errorf("%s %s not installed: %v", want.kind, want.name, err)
		}
	}
	dep := findObject(objs, "Deployment", sa)
	if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 2 {
		t.Errorf("Deployment replicas %d, want 2", n)
	}
	cfg := chartConfig(t, objs, ns)
	if cfg.Policy.Mode != preempt.ModeAdvise {
		t.Errorf("the chart's default mode %q, want advise", cfg.Policy.Mode)
	}
	cfg.Policy.Mode = preempt.ModeEnforce

	var forbidden atomic.Int64
	var lastForbidden atomic.Value
	rc := asServiceAccount(env, ns, sa, &forbidden, &lastForbidden)
	probe, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the chart's ServiceAccount: %v, want Forbidden", err)
	}
	forbidden.Store(0) // that probe was meant to be refused

	a, _, wlA, _ := runningAndPending(ctx, t, env, "")
	metricsAddr := freeLoopbackAddr(t)
	cfg.Metrics.BindAddress = metricsAddr
	c, _ := runPlanner(ctx, t, rc, env.Config, cfg, 60*time.Second, kueueext.WithSecureMetrics(""))
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))
	if _, err := env.WaitFor(ctx, wlA, plannerBound, func() bool { n, ok := boostValue(wlA); return ok && n == -100 }); err != nil {
		t.Fatalf("boost not written under the chart's ServiceAccount: %v (403s %d, last %v)", err, forbidden.Load(), lastForbidden.Load())
	}
	pf := waitPF(ctx, t, c, a, bound, "status written", func(pf *v1alpha1.ProgressForecast) bool {
		return pf.Status.Verdict == string(preempt.Plateaued) && pf.Status.Boost == -100 && pf.Status.Mode == "enforce"
	})
	t.Logf("ProgressForecast %s: verdict %s boost %d", pf.Name, pf.Status.Verdict, pf.Status.Boost)
	ev := waitEvent(ctx, t, c, a.Namespace, "TrainJob", a.Name, kueueext.ReasonBoostChanged)
	t.Logf("Event: %s %s", ev.Reason, ev.Note)
	// The secure metrics endpoint works under the chart's RBAC: the
	// planner's TokenReviews and SubjectAccessReviews are allowed.
	token := scraperToken(ctx, t, env, ns, "prometheus", sa+"-metrics-reader")
	if code, body := scrape(ctx, t, "https://"+metricsAddr+"/metrics", token); code != http.StatusOK || !strings.Contains(body, "planner_decisions_total") {
		t.Errorf("scrape with the metrics-reader role: %d", code)
	}
	if err := <-replayDone; err != nil {
		t.Errorf("replay: %v", err)
	}
	if n := forbidden.Load(); n > 0 {
		t.Errorf("%d requests of the planner were forbidden, last %v", n, lastForbidden.Load())
	}
}

// TestChartInstallCustom: a non-default render (enforce mode with
// overrides, the live page on, the ServiceMonitor off, 3 replicas, node
// selector, tolerations, priority class) installs with server-side apply
// and its config runs the planner in enforce mode.
func TestChartInstallCustom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := framework.Start(t)
	const ns = "ml-platform"
	objs := chartRender(t, "progress-planner-custom.yaml")
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	serverSideApply(ctx, t, env, append(objs, nsObj))
	if findObject(objs, "ServiceMonitor", "") != nil {
		t.Error("the custom render has a ServiceMonitor")
	}
	dep := findObject(objs, "Deployment", "")
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("apps/v1")
	got.SetKind("Deployment")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dep.GetName()}, got); err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
	cargs, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if !strings.Contains(strings.Join(cargs, " "), "--ui-addr=:8082") {
		t.Errorf("installed Deployment's args %v lack the loopback UI address", cargs)
	}
	if pc, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "priorityClassName"); pc != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", pc)
	}
	cfg := chartConfig(t, objs, ns)
	if cfg.Policy.Mode != preempt.ModeEnforce {
		t.Errorf("custom mode %q, want enforce", cfg.Policy.Mode)
	}
	var forbidden atomic.Int64
	var lastForbidden atomic.Value
	rc := asServiceAccount(env, ns, dep.GetName(), &forbidden, &lastForbidden)
	a, _, wlA, _ := runningAndPending(ctx, t, env, "")
	c, _ := runPlanner(ctx, t, rc, env.Config, cfg, 60*time.Second)
	replayDone := replay(ctx, t, c, a, prefix(history(t, "synth__early-plateau").Reports, 0.9))
	if _, err := env.WaitFor(ctx, wlA, plannerBound, func() bool { n, ok := boostValue(wlA); return ok && n == -100 }); err != nil {
		t.Fatalf("boost not written with the custom render: %v (403s %d, last %v)", err, forbidden.Load(), lastForbidden.Load())
	}
	if err := <-replayDone; err != nil {
		t.Errorf("replay: %v", err)
	}
	if n := forbidden.Load(); n > 0 {
		t.Errorf("%d requests were forbidden, last %v", n, lastForbidden.Load())
	}
}

// scraperToken creates ServiceAccount ns/name, binds it to clusterRole
// (unless empty) and returns a token for it (TokenRequest).
func scraperToken(ctx context.Context, t *testing.T, env *framework.Env, ns, name, clusterRole string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if clusterRole != "" {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + clusterRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// scrape GETs url (the endpoint's certificate is self-signed: not
// verified) with an optional bearer token; -1 when it cannot connect.
func scrape(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(b)
}

// TestSecureMetrics: installed from config/default, the planner (under its
// ServiceAccount, with --metrics-secure) serves metrics over HTTPS only to
// callers the API server authenticates and authorizes: no token gets 401,
// a ServiceAccount without the role 403, one bound to the scraper
// ClusterRole the metrics; plain HTTP gets nothing.
func TestSecureMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := framework.Start(t)
	const ns, sa = "progress-planner-system", "progress-planner"
	serverSideApply(ctx, t, env, renderKustomization(t, "../../config/default", ""))
	cfg := testConfig()
	cfg.LeaderElection.Enabled, cfg.LeaderElection.Namespace = true, ns
	addr := freeLoopbackAddr(t)
	cfg.Metrics.BindAddress = addr
	var forbidden atomic.Int64
	var lastForbidden atomic.Value
	rc := asServiceAccount(env, ns, sa, &forbidden, &lastForbidden)
	runPlanner(ctx, t, rc, env.Config, cfg, 60*time.Second, kueueext.WithSecureMetrics(""))
	url := "https://" + addr + "/metrics"

	var code int
	var body string
	if _, err := framework.Poll(ctx, bound, func(ctx context.Context) (bool, error) {
		code, body = scrape(ctx, t, url, "")
		return code != -1, nil
	}); err != nil {
		t.Fatalf("metrics endpoint not up: %v (%s)", err, body)
	}
	if code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("unauthenticated scrape: %d, want 401 or 403", code)
	}
	t.Logf("unauthenticated scrape: %d %s", code, strings.TrimSpace(body))
	if code, body := scrape(ctx, t, "http://"+addr+"/metrics", ""); code == http.StatusOK {
		t.Errorf("plain HTTP scrape succeeded: %.200s", body)
	}
	noRole := scraperToken(ctx, t, env, ns, "nobody", "")
	code, body = scrape(ctx, t, url, noRole)
	if code != http.StatusForbidden {
		t.Errorf("scrape by a ServiceAccount without the role: %d, want 403", code)
	}
	t.Logf("scrape without the role: %d %s", code, strings.TrimSpace(body))
	token := scraperToken(ctx, t, env, ns, "prometheus", "progress-planner-metrics-reader")
	code, body = scrape(ctx, t, url, token)
	if code != http.StatusOK {
		t.Fatalf("scrape with the metrics-reader role: %d %.300s", code, body)
	}
	for _, m := range []string{"planner_tracked_jobs", "planner_api_available", "leader_election_master_status"} {
		if !strings.Contains(body, m) {
			t.Errorf("scraped metrics lack %s", m)
		}
	}
	t.Logf("scrape with the metrics-reader role: 200, %d bytes", len(body))
	if n := forbidden.Load(); n > 0 {
		t.Errorf("%d requests of the planner were forbidden (TokenReview/SubjectAccessReview need config/rbac/metrics_auth_role.yaml), last %v", n, lastForbidden.Load())
	}
}
