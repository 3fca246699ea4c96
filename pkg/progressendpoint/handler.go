package progressendpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/progress"
)

// Sink receives every accepted report, as sent (the history validates it
// again when it folds it in). `planner run` hands them to the job
// framework's report source (ToSource).
type Sink interface {
	Accept(ctx context.Context, job JobRef, status progress.TrainerStatus, receivedAt time.Time) error
}

// Options configure a Handler.
type Options struct {
	// Client creates TokenReviews.
	Client client.Client
	// Reader reads pods and job owners: the manager's API reader, so the
	// planner caches no pods.
	Reader client.Reader
	// Recorder records an Event on a job a foreign pod reported for; nil:
	// no Events.
	Recorder events.EventRecorder
	Sink     Sink
	// Audience the tokens must carry; empty: DefaultAudience.
	Audience string
	// RateLimit per job; zero: DefaultRateLimit.
	RateLimit RateLimit
	// MaxBodyBytes; zero: 64 KiB, the Trainer's limit.
	MaxBodyBytes int64
	// Now is the clock (rate limit, receivedAt); nil: time.Now.
	Now func() time.Time
	Log logr.Logger
}

// Handler serves POST StatusPath(...) for every kind in jobKinds.
type Handler struct {
	opts   Options
	lim    *limiter
	tokens tokenCache
	// owners maps a pod and the job it reported for to the job's UID once
	// the owner chain said the pod belongs to it.
	owners *expiringCache[ownerKey, string]
	mux    *http.ServeMux
	// renewals are the background TokenReview renewals in flight.
	renewals sync.WaitGroup
}

// NewHandler checks opts and fills in the defaults.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Client == nil || opts.Reader == nil || opts.Sink == nil {
		return nil, errors.New("progress endpoint: Client, Reader and Sink are required")
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.RateLimit == (RateLimit{}) {
		opts.RateLimit = DefaultRateLimit()
	}
	if !(opts.RateLimit.QPS > 0) || math.IsInf(opts.RateLimit.QPS, 0) || opts.RateLimit.Burst < 1 {
		return nil, fmt.Errorf("progress endpoint: rate limit %g/s burst %d: both must be positive", opts.RateLimit.QPS, opts.RateLimit.Burst)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = maxBodyBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{opts: opts, lim: newLimiter(opts.RateLimit, opts.Now), tokens: newTokenCache(),
		owners: newExpiringCache[ownerKey, string](), mux: http.NewServeMux()}
	for _, k := range jobKinds {
		pattern := fmt.Sprintf("POST /apis/%s/%s/namespaces/{namespace}/%s/{name}/status", k.Group, k.Version, k.Resource)
		h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			h.report(w, r, JobRef{Group: k.Group, Version: k.Version, Kind: k.Kind, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found: reports go to POST /apis/<group>/<version>/namespaces/<namespace>/<jobs>/<name>/status", nil)
	})
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// report is one report's way through the checks, cheapest refusal first
// where it leaks nothing: size, token, job, owner chain, rate, body.
func (h *Handler) report(w http.ResponseWriter, r *http.Request, job JobRef) {
	ctx := r.Context()
	log := h.opts.Log.WithValues("job", job.String())
	if r.ContentLength > h.opts.MaxBodyBytes {
		h.refuse(w, log, outcomeTooLarge, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("request body of %d bytes is over the %d-byte limit", r.ContentLength, h.opts.MaxBodyBytes), nil)
		return
	}
	who, err := h.authenticate(ctx, r.Header.Get("Authorization"))
	if err != nil {
		h.authError(w, log, err)
		return
	}
	log = log.WithValues("pod", who.Namespace+"/"+who.PodName, "serviceAccount", who.ServiceAccount)
	if err := h.checkOwner(ctx, w, log, who, &job); err != nil {
		return
	}
	if ok, wait := h.lim.allow(job.Namespace + "/" + job.Group + "/" + job.Kind + "/" + job.Name); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		h.refuse(w, log, outcomeRateLimited, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("too many reports for %s: at most %g per second, bursts of %d; retry after %d s", job, h.opts.RateLimit.QPS, h.opts.RateLimit.Burst, max(secs, 1)), nil)
		return
	}
	h.accept(w, r, log, job)
}

// checkOwner finds the job named in the path and checks the caller's pod
// belongs to it, or finds that answer in the owner cache; on a refusal it
// has answered and returns an error.
func (h *Handler) checkOwner(ctx context.Context, w http.ResponseWriter, log logr.Logger, who caller, job *JobRef) error {
	key, now := ownerKeyOf(who, *job), h.opts.Now()
	if uid, ok := h.owners.get(key, now); ok {
		job.UID = uid
		return nil
	}
	var target *metav1.PartialObjectMetadata
	if who.Namespace == job.Namespace {
		t, err := h.getJob(ctx, *job)
		switch {
		case apierrors.IsNotFound(err):
			h.refuse(w, log, outcomeNotFound, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s not found", job), nil)
			return err
		case err != nil:
			log.Error(err, "reading the job of a progress report")
			h.refuse(w, log, outcomeError, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error", nil)
			return err
		}
		target = t
		job.UID = string(t.UID)
	}
	err := authorize(ctx, h.opts.Reader, who, *job)
	var fb *forbidden
	switch {
	case errors.As(err, &fb):
		metricForbidden.Inc()
		if target != nil && h.opts.Recorder != nil {
			h.opts.Recorder.Eventf(target, nil, corev1.EventTypeWarning, "ProgressReportForbidden", "ReportProgress",
				"progress report refused: %s (service account %s)", fb.msg, who.ServiceAccount)
		}
		h.refuse(w, log, outcomeForbidden, http.StatusForbidden, metav1.StatusReasonForbidden, "forbidden: "+fb.msg, nil)
		return err
	case err != nil:
		log.Error(err, "authorising a progress report")
		h.refuse(w, log, outcomeError, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error", nil)
		return err
	}
	h.owners.put(key, job.UID, now.Add(ownerCacheTTL), now)
	return nil
}

// authenticate reuses a recent successful TokenReview of the same token
// (caches.go), renewing it ahead of its expiry, else asks the API server.
func (h *Handler) authenticate(ctx context.Context, header string) (caller, error) {
	token, now := bearerToken(header), h.opts.Now()
	if token != "" {
		if who, ok, renew := h.tokens.get(token, h.opts.Audience, now); ok {
			if renew {
				h.renew(token)
			}
			return who, nil
		}
	}
	who, err := authenticate(ctx, h.opts.Client, header, h.opts.Audience)
	if err == nil {
		h.tokens.put(token, h.opts.Audience, who, now)
	}
	return who, err
}

// renew reviews token again in the background (tokenRenewAhead).
func (h *Handler) renew(token string) {
	h.renewals.Add(1)
	go func() {
		defer h.renewals.Done()
		ctx, cancel := context.WithTimeout(context.Background(), tokenRenewAhead)
		defer cancel()
		who, err := authenticate(ctx, h.opts.Client, "Bearer "+token, h.opts.Audience)
		h.tokens.renewed(token, h.opts.Audience, who, err, h.opts.Now())
	}()
}

func (h *Handler) getJob(ctx context.Context, job JobRef) (*metav1.PartialObjectMetadata, error) {
	for _, k := range jobKinds {
		if k.Group != job.Group || k.Kind != job.Kind {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(k.GroupVersionKind)
		if err := h.opts.Reader.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Name}, obj); err != nil {
			return nil, fmt.Errorf("get %s: %w", job, err)
		}
		return obj, nil
	}
	return nil, fmt.Errorf("unknown job kind %s.%s", job.Kind, job.Group)
}

func (h *Handler) authError(w http.ResponseWriter, log logr.Logger, err error) {
	if errors.Is(err, errUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="progress-planner"`)
		h.refuse(w, log, outcomeUnauthenticated, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err.Error(), nil)
		return
	}
	log.Error(err, "authenticating a progress report")
	h.refuse(w, log, outcomeError, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error: token review failed", nil)
}

// accept reads, decodes and validates the body and hands the report to the
// Sink. The answer echoes the request, as the Trainer's server does.
func (h *Handler) accept(w http.ResponseWriter, r *http.Request, log logr.Logger, job JobRef) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.refuse(w, log, outcomeTooLarge, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("request body is over the %d-byte limit", h.opts.MaxBodyBytes), nil)
		return
	case err != nil:
		h.refuse(w, log, outcomeInvalid, http.StatusBadRequest, metav1.StatusReasonBadRequest, "reading the request body: "+err.Error(), nil)
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		h.refuse(w, log, outcomeInvalid, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "invalid payload: "+err.Error(), nil)
		return
	}
	if req.TrainerStatus == nil {
		// The Trainer answers an empty request with 200 and stores nothing.
		writeJSON(w, http.StatusOK, req)
		return
	}
	now := h.opts.Now()
	snap, causes, ok := validate(req.TrainerStatus, now)
	if !ok {
		h.refuse(w, log, outcomeInvalid, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "invalid trainerStatus", causes)
		return
	}
	if err := h.opts.Sink.Accept(r.Context(), job, toProgress(req.TrainerStatus), now); err != nil {
		log.Error(err, "handing an accepted progress report on")
		h.refuse(w, log, outcomeError, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the report could not be stored; retry later", nil)
		return
	}
	metricRequests.WithLabelValues(outcomeAccepted).Inc()
	log.V(1).Info("progress report accepted", "progress", snap.Progress, "step", snap.Step)
	writeJSON(w, http.StatusOK, req)
}

// refuse answers a refused report with a Kubernetes Status, as the
// Trainer's server does, counts it and logs it.
func (h *Handler) refuse(w http.ResponseWriter, log logr.Logger, outcome string, code int, reason metav1.StatusReason, msg string, causes []cause) {
	metricRequests.WithLabelValues(outcome).Inc()
	log.V(1).Info("progress report refused", "outcome", outcome, "code", code, "message", msg)
	writeStatus(w, code, reason, msg, causes)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, causes []cause) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
	if len(causes) > 0 {
		st.Details = &metav1.StatusDetails{}
		for _, c := range causes {
			st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: metav1.CauseType(c.Reason), Message: c.Message, Field: c.Field})
		}
	}
	writeJSON(w, code, st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
