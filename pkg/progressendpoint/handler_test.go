package progressendpoint

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/progress"
)

// fakeToken is what the fake TokenReview knows of a token: the audience
// it was issued for, whether it expired, and the pod it is bound to.
type fakeToken struct {
	aud      string
	expired  bool
	pod, uid string
	// echoNoAudience: the review answers authenticated without the
	// audiences (an authenticator that ignores them).
	echoNoAudience bool
}

// tokenReviews answers TokenReviews like the API server does for bound
// service-account tokens in namespace ns (unit tests only; the e2e tests
// use the real API).
func tokenReviews(tokens map[string]fakeToken, reviews *atomic.Int32) interceptor.Funcs {
	return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		tr, ok := obj.(*authnv1.TokenReview)
		if !ok {
			return c.Create(ctx, obj, opts...)
		}
		reviews.Add(1)
		t, known := tokens[tr.Spec.Token]
		switch {
		case !known:
			tr.Status = authnv1.TokenReviewStatus{Error: "[invalid bearer token, square/go-jose: error in cryptographic primitive]"}
		case t.expired:
			tr.Status = authnv1.TokenReviewStatus{Error: "[invalid bearer token, service account token has expired]"}
		case len(tr.Spec.Audiences) == 0 || tr.Spec.Audiences[0] != t.aud:
			tr.Status = authnv1.TokenReviewStatus{Error: fmt.Sprintf("[invalid bearer token, token audiences [%q] is invalid for the target audiences %q]", t.aud, tr.Spec.Audiences)}
		default:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authnv1.UserInfo{
				Username: "system:serviceaccount:ns:default",
				Extra:    map[string]authnv1.ExtraValue{},
			}}
			if t.echoNoAudience {
				tr.Status.Audiences = nil
			}
			if t.pod != "" {
				tr.Status.User.Extra[extraPodName] = authnv1.ExtraValue{t.pod}
				tr.Status.User.Extra[extraPodUID] = authnv1.ExtraValue{t.uid}
			}
		}
		return nil
	}}
}

type recordingSink struct {
	mu   sync.Mutex
	got  []JobRef
	snap []progress.Snapshot
}

func (s *recordingSink) Accept(_ context.Context, job JobRef, status progress.TrainerStatus, _ time.Time) error {
	// The sink gets the report as sent; the snapshot is what the history
	// will make of it.
	snap, _, _ := progress.Parse(0, status)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, job)
	s.snap = append(s.snap, snap)
	return nil
}

func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func ownedBy(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// cluster: jobs x and y, each with one pod; TrainJob tj whose pod is owned
// by a Job the TrainJob controls; a pod owned by nothing.
func clusterObjects() []client.Object {
	job := func(name string, uid types.UID, owners []metav1.OwnerReference) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owners}}
	}
	pod := func(name string, uid types.UID, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owners}}
	}
	return []client.Object{
		job("x", "uid-x", nil), pod("px", "uid-px", ownedBy("batch/v1", "Job", "x", "uid-x")),
		job("y", "uid-y", nil), pod("py", "uid-py", ownedBy("batch/v1", "Job", "y", "uid-y")),
		&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tj", UID: "uid-tj"}},
		job("tj-node", "uid-tjn", ownedBy("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", "uid-tj")),
		pod("ptj", "uid-ptj", ownedBy("batch/v1", "Job", "tj-node", "uid-tjn")),
		pod("lonely", "uid-lonely", nil),
	}
}

var testTokens = map[string]fakeToken{
	"tok-x":       {aud: DefaultAudience, pod: "px", uid: "uid-px"},
	"tok-y":       {aud: DefaultAudience, pod: "py", uid: "uid-py"},
	"tok-tj":      {aud: DefaultAudience, pod: "ptj", uid: "uid-ptj"},
	"tok-lonely":  {aud: DefaultAudience, pod: "lonely", uid: "uid-lonely"},
	"tok-old-px":  {aud: DefaultAudience, pod: "px", uid: "uid-of-a-deleted-px"},
	"tok-api":     {aud: "https://kubernetes.default.svc", pod: "px", uid: "uid-px"},
	"tok-expired": {aud: DefaultAudience, expired: true, pod: "px", uid: "uid-px"},
	"tok-nopod":   {aud: DefaultAudience},
	"tok-noaud":   {aud: DefaultAudience, pod: "px", uid: "uid-px", echoNoAudience: true},
}

type fixture struct {
	// reviews counts the TokenReviews sent to the API server, gets the
	// reads of jobs, pods and owners.
	reviews, gets atomic.Int32
	h             *Handler
	sink          *recordingSink
	rec           *events.FakeRecorder
	now           time.Time
	mu            sync.Mutex
}

func newFixture(t *testing.T, rl RateLimit) *fixture {
	t.Helper()
	return newFixtureTokens(t, rl, testTokens)
}

func newFixtureTokens(t *testing.T, rl RateLimit, tokens map[string]fakeToken) *fixture {
	t.Helper()
	f := &fixture{sink: &recordingSink{}, rec: events.NewFakeRecorder(16), now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	funcs := tokenReviews(tokens, &f.reviews)
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		f.gets.Add(1)
		return c.Get(ctx, key, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(kueueext.NewScheme()).WithObjects(clusterObjects()...).
		WithInterceptorFuncs(funcs).Build()
	h, err := NewHandler(Options{Client: c, Reader: c, Recorder: f.rec, Sink: f.sink, RateLimit: rl,
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

const goodBody = `{"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":120,` +
	`"metrics":[{"name":"loss","value":"0.15"},{"name":"current_step","value":"450"},{"name":"total_steps","value":"1000"}],` +
	`"lastUpdatedTime":"2026-12-02T11:59:58Z"}}`

// post sends body to job's path with token and returns the status code
// and the decoded Status (for refusals).
func (f *fixture) post(t *testing.T, path, token, body string) (int, metav1.Status, http.Header) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	var st metav1.Status
	if w.Code != http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
			t.Fatalf("%s: refusal %d is not a JSON Status: %v: %s", path, w.Code, err, w.Body.String())
		}
		if st.Message == "" || st.Code != int32(w.Code) {
			t.Fatalf("%s: refusal %d without a reason: %s", path, w.Code, w.Body.String())
		}
	}
	return w.Code, st, w.Header()
}

// kindOfGroup is the built kind of an API group that has one.
func kindOfGroup(t *testing.T, group string) schema.GroupKind {
	t.Helper()
	for _, k := range jobKinds {
		if k.Group == group {
			return k.GroupKind()
		}
	}
	t.Fatalf("no built kind of group %q", group)
	return schema.GroupKind{}
}

func jobPath(t *testing.T, group, name string) string {
	t.Helper()
	p, err := StatusPath(kindOfGroup(t, group), "ns", name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReportAccepted(t *testing.T) {
	f := newFixture(t, RateLimit{})
	code, _, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", goodBody)
	if code != http.StatusOK {
		t.Fatalf("code %d, want 200", code)
	}
	if f.sink.count() != 1 {
		t.Fatalf("sink got %d reports, want 1", f.sink.count())
	}
	got, snap := f.sink.got[0], f.sink.snap[0]
	want := JobRef{Group: "batch", Version: "v1", Kind: "Job", Namespace: "ns", Name: "x", UID: "uid-x"}
	if got != want {
		t.Errorf("job %+v, want %+v", got, want)
	}
	if snap.Progress != 0.45 || snap.Step != 450 || snap.TotalSteps != 1000 || snap.ReportedETA != 120 || snap.Metrics["loss"] != 0.15 {
		t.Errorf("snapshot %+v", snap)
	}
}

// The Trainer's own path: pod → Job → TrainJob.
func TestReportAcceptedThroughTrainJobChain(t *testing.T) {
	f := newFixture(t, RateLimit{})
	path := jobPath(t, "trainer.kubeflow.org", "tj")
	if path != "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status" {
		t.Fatalf("path %s is not the Trainer's", path)
	}
	if code, st, _ := f.post(t, path, "tok-tj", goodBody); code != http.StatusOK {
		t.Fatalf("code %d (%s), want 200", code, st.Message)
	}
	if f.sink.count() != 1 || f.sink.got[0].Kind != "TrainJob" || f.sink.got[0].UID != "uid-tj" {
		t.Fatalf("sink got %+v", f.sink.got)
	}
}

func TestUnauthenticated(t *testing.T) {
	for _, tc := range []struct{ name, token, reason string }{
		{"no token", "", "no bearer token"},
		{"unknown token", "not-a-token", "invalid bearer token"},
		{"wrong audience", "tok-api", "audiences"},
		{"expired", "tok-expired", "expired"},
		{"audience not confirmed", "tok-noaud", "not for audience"},
		{"not bound to a pod", "tok-nopod", "not bound to a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, RateLimit{})
			code, st, hdr := f.post(t, jobPath(t, "batch", "x"), tc.token, goodBody)
			if code != http.StatusUnauthorized || st.Reason != metav1.StatusReasonUnauthorized {
				t.Fatalf("code %d reason %s, want 401 Unauthorized", code, st.Reason)
			}
			if !strings.Contains(st.Message, tc.reason) {
				t.Errorf("message %q does not say %q", st.Message, tc.reason)
			}
			if hdr.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate header")
			}
			if f.sink.count() != 0 {
				t.Error("an unauthenticated report reached the sink")
			}
		})
	}
}

func TestForbiddenCountedAndRecorded(t *testing.T) {
	for _, tc := range []struct{ name, token, job, reason string }{
		{"pod of another job", "tok-x", "y", "does not belong to"},
		{"pod of no job", "tok-lonely", "y", "does not belong to"},
		{"token of a deleted pod reusing the name", "tok-old-px", "x", "not the pod the token was issued to"},
		{"pod of a Job under a TrainJob, for another Job", "tok-tj", "x", "does not belong to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, RateLimit{})
			before := testutil.ToFloat64(metricForbidden)
			code, st, _ := f.post(t, jobPath(t, "batch", tc.job), tc.token, goodBody)
			if code != http.StatusForbidden || !strings.Contains(st.Message, tc.reason) {
				t.Fatalf("code %d message %q, want 403 saying %q", code, st.Message, tc.reason)
			}
			if d := testutil.ToFloat64(metricForbidden) - before; d != 1 {
				t.Errorf("planner_endpoint_forbidden_total grew by %g, want 1", d)
			}
			select {
			case ev := <-f.rec.Events:
				if !strings.Contains(ev, "ProgressReportForbidden") || !strings.Contains(ev, tc.reason) {
					t.Errorf("event %q", ev)
				}
			default:
				t.Error("no Event recorded on the job")
			}
			if f.sink.count() != 0 {
				t.Error("a forbidden report reached the sink")
			}
		})
	}
}

func TestForbiddenAcrossNamespaces(t *testing.T) {
	f := newFixture(t, RateLimit{})
	path, _ := StatusPath(kindOfGroup(t, "batch"), "other", "x")
	code, st, _ := f.post(t, path, "tok-x", goodBody)
	if code != http.StatusForbidden || !strings.Contains(st.Message, `namespace "ns"`) {
		t.Fatalf("code %d message %q, want 403", code, st.Message)
	}
}

func TestUnknownJobAndPath(t *testing.T) {
	f := newFixture(t, RateLimit{})
	if code, _, _ := f.post(t, jobPath(t, "batch", "nope"), "tok-x", goodBody); code != http.StatusNotFound {
		t.Errorf("unknown job: code %d, want 404", code)
	}
	if code, _, _ := f.post(t, "/apis/example.com/v1/namespaces/ns/widgets/x/status", "tok-x", goodBody); code != http.StatusNotFound {
		t.Errorf("unknown path: code %d, want 404", code)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, jobPath(t, "batch", "x"), nil))
	if w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound {
		t.Errorf("GET: code %d", w.Code)
	}
}

func TestBodyTooLarge(t *testing.T) {
	f := newFixture(t, RateLimit{})
	big := `{"trainerStatus":{"progressPercentage":1,"metrics":[` + strings.Repeat(`{"name":"a","value":"1"},`, 4000) + `{"name":"b","value":"1"}]}}`
	code, st, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", big)
	if code != http.StatusRequestEntityTooLarge || st.Reason != metav1.StatusReasonRequestEntityTooLarge {
		t.Fatalf("Content-Length: code %d, want 413", code)
	}
	// Without a Content-Length (chunked), the limit applies while reading.
	r := httptest.NewRequest(http.MethodPost, jobPath(t, "batch", "x"), io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer tok-x")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "limit") {
		t.Fatalf("chunked: code %d %s, want 413", w.Code, w.Body.String())
	}
	if f.sink.count() != 0 {
		t.Error("an oversized report reached the sink")
	}
}

func TestRateLimitPerJob(t *testing.T) {
	f := newFixture(t, RateLimit{QPS: 0.5, Burst: 3})
	for i := range 3 {
		if code, _, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", goodBody); code != http.StatusOK {
			t.Fatalf("report %d: code %d, want 200", i, code)
		}
	}
	code, st, hdr := f.post(t, jobPath(t, "batch", "x"), "tok-x", goodBody)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") != "2" || !strings.Contains(st.Message, "retry after") {
		t.Fatalf("4th report: code %d Retry-After %q message %q, want 429 after 2 s", code, hdr.Get("Retry-After"), st.Message)
	}
	// Another job is not affected.
	if code, _, _ := f.post(t, jobPath(t, "batch", "y"), "tok-y", goodBody); code != http.StatusOK {
		t.Fatalf("job y during x's flood: code %d, want 200", code)
	}
	// The bucket refills with time.
	f.mu.Lock()
	f.now = f.now.Add(2 * time.Second)
	f.mu.Unlock()
	if code, _, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", goodBody); code != http.StatusOK {
		t.Fatalf("after Retry-After: code %d, want 200", code)
	}
	if f.sink.count() != 5 {
		t.Errorf("sink got %d, want 5", f.sink.count())
	}
}

func TestInvalidReports(t *testing.T) {
	long := strings.Repeat("m", 65)
	for _, tc := range []struct{ name, body, field, reason string }{
		{"malformed JSON", `{"trainerStatus":`, "", ""},
		{"unknown field", `{"trainerStatus":{"progressPercentage":5,"progres":7}}`, "", ""},
		{"unknown top-level field", `{"trainerStatus":{"progressPercentage":5},"extra":1}`, "", ""},
		{"two objects", `{"trainerStatus":{"progressPercentage":5}}{}`, "", ""},
		{"fractional percentage", `{"trainerStatus":{"progressPercentage":45.5}}`, "", ""},
		{"string percentage", `{"trainerStatus":{"progressPercentage":"45"}}`, "", ""},
		{"progress over 100", `{"trainerStatus":{"progressPercentage":150,"lastUpdatedTime":"2026-12-02T11:59:58Z"}}`, "trainerStatus.progressPercentage", "progress-range"},
		{"negative ETA", `{"trainerStatus":{"progressPercentage":5,"estimatedRemainingSeconds":-1,"lastUpdatedTime":"2026-12-02T11:59:58Z"}}`, "trainerStatus.estimatedRemainingSeconds", "negative"},
		{"metric name too long", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T11:59:58Z","metrics":[{"name":"` + long + `","value":"1"}]}}`, "trainerStatus.metrics[0].name", "invalid-name"},
		{"empty metric value", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T11:59:58Z","metrics":[{"name":"loss","value":""}]}}`, "trainerStatus.metrics[0].value", "invalid-name"},
		{"bad time", `{"trainerStatus":{"progressPercentage":5,"lastUpdatedTime":"yesterday"}}`, "", ""},
		// The planner's own rules (pkg/progress), with its reasons.
		{"duplicate metric", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T11:59:58Z","metrics":[{"name":"loss","value":"1"},{"name":"loss","value":"2"}]}}`, "trainerStatus.loss", "duplicate-metric"},
		{"step beyond total", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T11:59:58Z","metrics":[{"name":"current_step","value":"50"},{"name":"total_steps","value":"10"}]}}`, "trainerStatus.current_step", "inconsistent"},
		{"no lastUpdatedTime", `{"trainerStatus":{"progressPercentage":5}}`, "trainerStatus.lastUpdatedTime", "FieldValueRequired"},
		{"nothing usable", `{"trainerStatus":{"lastUpdatedTime":"2026-12-02T11:59:58Z"}}`, "trainerStatus.trainerStatus", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, RateLimit{})
			code, st, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", tc.body)
			if code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid {
				t.Fatalf("code %d reason %s (%s), want 422 Invalid", code, st.Reason, st.Message)
			}
			if tc.reason != "" {
				if st.Details == nil || len(st.Details.Causes) == 0 || string(st.Details.Causes[0].Type) != tc.reason || st.Details.Causes[0].Field != tc.field {
					t.Fatalf("causes %+v, want %s on %s", st.Details, tc.reason, tc.field)
				}
			}
			if f.sink.count() != 0 {
				t.Error("an invalid report reached the sink")
			}
		})
	}
}

// An empty request is answered 200 and stores nothing, as by the Trainer.
func TestEmptyRequest(t *testing.T) {
	f := newFixture(t, RateLimit{})
	if code, _, _ := f.post(t, jobPath(t, "batch", "x"), "tok-x", `{}`); code != http.StatusOK {
		t.Fatalf("code %d, want 200", code)
	}
	if f.sink.count() != 0 {
		t.Error("an empty request reached the sink")
	}
}

func TestNewHandlerRejectsBadOptions(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	if _, err := NewHandler(Options{Client: c, Reader: c}); err == nil {
		t.Error("no sink: want an error")
	}
	if _, err := NewHandler(Options{Client: c, Reader: c, Sink: &recordingSink{}, RateLimit: RateLimit{QPS: -1, Burst: 1}}); err == nil {
		t.Error("negative QPS: want an error")
	}
}

// A successful review is reused for the same token within the TTL and the
// token's own expiry; failed reviews are not cached.
func TestTokenReviewsCached(t *testing.T) {
	exp := time.Date(2026, 12, 2, 12, 0, 10, 0, time.UTC) // 10 s after the fixture's clock
	jwt := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d}`, exp.Unix()))) + ".sig"
	tokens := map[string]fakeToken{"tok-x": testTokens["tok-x"], jwt: testTokens["tok-x"]}
	f := newFixtureTokens(t, RateLimit{QPS: 100, Burst: 100}, tokens)
	path := jobPath(t, "batch", "x")
	advance := func(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }
	send := func(token string, want int) {
		t.Helper()
		if code, st, _ := f.post(t, path, token, goodBody); code != want {
			t.Fatalf("code %d (%s), want %d", code, st.Message, want)
		}
	}
	send("tok-x", http.StatusOK)
	send("tok-x", http.StatusOK)
	if n := f.reviews.Load(); n != 1 {
		t.Fatalf("%d reviews for two reports with one token, want 1", n)
	}
	advance(tokenCacheTTL - tokenRenewAhead - time.Second) // within the TTL, before its renewal
	send("tok-x", http.StatusOK)
	f.h.renewals.Wait()
	if n := f.reviews.Load(); n != 1 {
		t.Fatalf("%d reviews within the TTL, want 1", n)
	}
	advance(tokenRenewAhead + tokenCacheTTL/2 + time.Second) // past it, whatever its spread
	send("tok-x", http.StatusOK)
	if n := f.reviews.Load(); n != 2 {
		t.Fatalf("%d reviews after the TTL, want 2", n)
	}
	// A token expiring in 10 s is not reused past its expiry.
	f.mu.Lock()
	f.now = exp.Add(-5 * time.Second)
	f.mu.Unlock()
	send(jwt, http.StatusOK)
	send(jwt, http.StatusOK)
	advance(5 * time.Second)
	send(jwt, http.StatusOK)
	f.h.renewals.Wait()
	if n := f.reviews.Load(); n != 4 {
		t.Fatalf("%d reviews, want 4: the JWT's expiry shortens its reuse", n)
	}
	for range 2 {
		send("not-a-token", http.StatusUnauthorized)
	}
	if n := f.reviews.Load(); n != 6 {
		t.Fatalf("%d reviews, want 6: failed reviews are not cached", n)
	}
}

// A token in use has its review renewed in the background before it
// expires, so its reports never wait on a TokenReview; a renewal the API
// server refuses ends the reuse at once.
func TestTokenReviewRenewedAhead(t *testing.T) {
	tokens := map[string]fakeToken{"tok-x": testTokens["tok-x"]}
	f := newFixtureTokens(t, RateLimit{QPS: 100, Burst: 100}, tokens)
	path := jobPath(t, "batch", "x")
	ttl := tokenTTL(cacheKey("tok-x", DefaultAudience))
	advance := func(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }
	send := func(want int) {
		t.Helper()
		if code, st, _ := f.post(t, path, "tok-x", goodBody); code != want {
			t.Fatalf("code %d (%s), want %d", code, st.Message, want)
		}
	}
	send(http.StatusOK)
	advance(ttl - tokenRenewAhead/2) // in the renewal window
	send(http.StatusOK)
	send(http.StatusOK) // one renewal per token, not one per report
	f.h.renewals.Wait()
	if n := f.reviews.Load(); n != 2 {
		t.Fatalf("%d reviews, want 2: the first and one renewal", n)
	}
	advance(tokenRenewAhead) // past the first review's expiry, within the renewal's
	send(http.StatusOK)
	f.h.renewals.Wait()
	if n := f.reviews.Load(); n != 2 {
		t.Fatalf("%d reviews past the first expiry, want 2: the renewal answers", n)
	}
	// The pod is deleted: the API server refuses the token from now on.
	delete(tokens, "tok-x")
	advance(ttl - tokenRenewAhead*3/2) // in the renewal's window: the report still passes, its renewal is refused
	send(http.StatusOK)
	f.h.renewals.Wait()
	send(http.StatusUnauthorized)
	if n := f.reviews.Load(); n != 4 {
		t.Fatalf("%d reviews, want 4: the refused renewal and the review of the refused report", n)
	}
}

// Once the owner chain said a pod belongs to a job, its next reports cost
// no reads until ownerCacheTTL; a refusal is checked again every time.
func TestOwnerChainCached(t *testing.T) {
	f := newFixture(t, RateLimit{QPS: 100, Burst: 100})
	send := func(token, job string, want int) {
		t.Helper()
		if code, st, _ := f.post(t, jobPath(t, "batch", job), token, goodBody); code != want {
			t.Fatalf("%s for %s: code %d (%s), want %d", token, job, code, st.Message, want)
		}
	}
	send("tok-x", "x", http.StatusOK)
	first := f.gets.Load()
	if first == 0 {
		t.Fatal("the first report read nothing: the owner chain was not checked")
	}
	send("tok-x", "x", http.StatusOK)
	f.mu.Lock()
	f.now = f.now.Add(tokenCacheTTL * 3 / 2) // a new TokenReview; the same pod
	f.mu.Unlock()
	send("tok-x", "x", http.StatusOK)
	if n := f.gets.Load(); n != first {
		t.Fatalf("%d reads after three reports of one pod, want %d (the first report's)", n, first)
	}
	if got := f.sink.got[len(f.sink.got)-1].UID; got != "uid-x" {
		t.Errorf("a cached report carries job UID %q, want uid-x", got)
	}
	send("tok-y", "x", http.StatusForbidden)
	afterRefusal := f.gets.Load()
	send("tok-y", "x", http.StatusForbidden)
	if f.gets.Load() == afterRefusal {
		t.Error("a refused pod was not checked again: refusals must not be cached")
	}
	f.mu.Lock()
	f.now = f.now.Add(ownerCacheTTL)
	f.mu.Unlock()
	before := f.gets.Load()
	send("tok-x", "x", http.StatusOK)
	if f.gets.Load() == before {
		t.Error("no reads after ownerCacheTTL: the owner chain must be checked again")
	}
}

// Every built kind has its own path, the Training Operator's kinds too
// (one API group), and StatusPath names it.
func TestStatusPathPerKind(t *testing.T) {
	seen := map[string]string{}
	for _, k := range jobKinds {
		p, err := StatusPath(k.GroupKind(), "ns", "j")
		if err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("kinds %s and %s share the path %s", other, k.Kind, p)
		}
		seen[p] = k.Kind
		if want := "/" + k.Resource + "/j/status"; !strings.HasSuffix(p, want) {
			t.Errorf("%s: path %s, want the suffix %s", k.Kind, p, want)
		}
	}
	if _, err := StatusPath(schema.GroupKind{Group: "ray.io", Kind: "RayJob"}, "ns", "j"); err == nil {
		t.Error("a kind not built has a path")
	}
}
