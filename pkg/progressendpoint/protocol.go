package progressendpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/progress-planner/planner/pkg/jobframework"
	"github.com/progress-planner/planner/pkg/progress"
)

// The environment contract of KEP-2779 (Trainer's TrainJobStatus plugin):
// a job's containers find the endpoint's URL, the CA bundle that signs its
// certificate and a projected service-account token through these. The
// reporters (Transformers' callback, the Kubeflow SDK) read only these.
const (
	EnvServerURL = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvCACert    = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvToken     = "KUBEFLOW_TRAINER_SERVER_TOKEN"
)

// DefaultAudience is the audience a pod's projected token must carry. It
// is the planner's own, not the Trainer's: a token for the planner cannot
// be replayed to the Trainer's status server or the API server, and the
// reverse.
const DefaultAudience = "progress-planner"

// Trainer API limits on trainerStatus (the TrainJob CRD's schema in
// github.com/kubeflow/trainer/v2 pkg/apis/trainer/v1alpha1, which the
// Trainer's status server relies on: the API server rejects a violating
// status write, and the server answers 422).
const (
	trainerMaxMetrics      = 256
	trainerMaxMetricLength = 64
	// maxBodyBytes is the Trainer status server's body limit (64 KiB).
	maxBodyBytes = 1 << 16
)

// JobRef names the job a report is for: the kind from the path, and the
// UID of the object that was found there when the report was authorised.
type JobRef struct {
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
	UID       string
}

func (j JobRef) String() string {
	return fmt.Sprintf("%s.%s %s/%s", j.Kind, j.Group, j.Namespace, j.Name)
}

// jobKinds are the kinds a report may target: the job framework's built
// kinds. trainjobs is the Trainer's own path; the other kinds use the same
// shape under their API groups so that the same client code works for
// them.
var jobKinds = jobframework.Resources()

// StatusPath is the path a job's reports go to; for TrainJobs it is the
// Trainer's own (statusserver.StatusUrl), so only the host differs. The
// kind is needed beside the group: the Training Operator's kinds share
// kubeflow.org.
func StatusPath(kind schema.GroupKind, namespace, name string) (string, error) {
	for _, k := range jobKinds {
		if k.GroupKind() == kind {
			return fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s/status", k.Group, k.Version, namespace, k.Resource, name), nil
		}
	}
	return "", fmt.Errorf("no progress path for kind %s", kind)
}

// updateRequest is the Trainer's UpdateTrainJobStatusRequest, with the
// Trainer's field types (integers where the CRD has int32) so that a value
// the Trainer cannot store is refused the same way.
type updateRequest struct {
	TrainerStatus *trainerStatus `json:"trainerStatus,omitempty"`
}

type trainerStatus struct {
	ProgressPercentage        *int32       `json:"progressPercentage,omitempty"`
	EstimatedRemainingSeconds *int32       `json:"estimatedRemainingSeconds,omitempty"`
	Metrics                   []metric     `json:"metrics,omitempty"`
	LastUpdatedTime           *metav1.Time `json:"lastUpdatedTime,omitempty"`
}

type metric struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// cause is one reason a report was refused, in the sender's terms.
type cause struct {
	Field   string
	Reason  string
	Message string
}

// decodeRequest decodes a body strictly: one JSON object, no unknown
// fields, nothing after it. A typo in a field name is an error the sender
// sees rather than a report silently missing its value.
func decodeRequest(body []byte) (updateRequest, error) {
	var req updateRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("decode trainerStatus request: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, errors.New("decode trainerStatus request: data after the JSON object")
	}
	return req, nil
}

// trainerRules checks what the Trainer's CRD schema checks: progress in
// 0–100, a non-negative ETA, at most 256 metrics, names and values of 1–64
// characters, and a lastUpdatedTime (the Trainer's server writes an absent
// one as null, which its CRD refuses: in effect it is required).
func trainerRules(ts *trainerStatus) []cause {
	var out []cause
	if ts.LastUpdatedTime == nil || ts.LastUpdatedTime.IsZero() {
		out = append(out, cause{"trainerStatus.lastUpdatedTime", string(metav1.CauseTypeFieldValueRequired),
			"required: the time the status was observed (RFC 3339)"})
	}
	if p := ts.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
		out = append(out, cause{"trainerStatus.progressPercentage", string(progress.RejectProgressRange),
			fmt.Sprintf("%d: should be between 0 and 100", *p)})
	}
	if e := ts.EstimatedRemainingSeconds; e != nil && *e < 0 {
		out = append(out, cause{"trainerStatus.estimatedRemainingSeconds", string(progress.RejectNegative),
			fmt.Sprintf("%d: should be greater than or equal to 0", *e)})
	}
	if len(ts.Metrics) > trainerMaxMetrics {
		out = append(out, cause{"trainerStatus.metrics", string(progress.RejectTooManyMetrics),
			fmt.Sprintf("%d items: must have at most %d items", len(ts.Metrics), trainerMaxMetrics)})
	}
	for i, m := range ts.Metrics {
		for _, f := range []struct{ name, v string }{{"name", m.Name}, {"value", m.Value}} {
			if n := len(f.v); n < 1 || n > trainerMaxMetricLength {
				out = append(out, cause{fmt.Sprintf("trainerStatus.metrics[%d].%s", i, f.name), string(progress.RejectInvalidName),
					fmt.Sprintf("length %d: should be 1 to %d characters", n, trainerMaxMetricLength)})
			}
		}
	}
	return out
}

// toProgress converts the wire form to pkg/progress's TrainerStatus.
func toProgress(ts *trainerStatus) progress.TrainerStatus {
	var out progress.TrainerStatus
	if ts.ProgressPercentage != nil {
		v := float64(*ts.ProgressPercentage)
		out.ProgressPercentage = &v
	}
	if ts.EstimatedRemainingSeconds != nil {
		v := float64(*ts.EstimatedRemainingSeconds)
		out.EstimatedRemainingSeconds = &v
	}
	for _, m := range ts.Metrics {
		out.Metrics = append(out.Metrics, progress.MetricValue{Name: m.Name, Value: m.Value})
	}
	if ts.LastUpdatedTime != nil && !ts.LastUpdatedTime.IsZero() {
		t := ts.LastUpdatedTime.UTC()
		out.LastUpdatedTime = &t
	}
	return out
}

// validate applies the Trainer's rules, then the planner's (progress.Parse:
// the same rules and reasons as reports read from TrainJob status). ok is
// false when the report is refused; causes says why.
func validate(ts *trainerStatus, at time.Time) (snap progress.Snapshot, causes []cause, ok bool) {
	if causes = trainerRules(ts); len(causes) > 0 {
		return snap, causes, false
	}
	snap, rejs, ok := progress.Parse(float64(at.UnixNano())/1e9, toProgress(ts))
	if ok {
		return snap, nil, true
	}
	for _, r := range rejs {
		msg := r.Detail
		if msg == "" {
			msg = strings.ReplaceAll(string(r.Reason), "-", " ")
		}
		causes = append(causes, cause{Field: "trainerStatus." + r.Field, Reason: string(r.Reason), Message: msg})
	}
	return snap, causes, false
}
