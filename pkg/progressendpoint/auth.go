package progressendpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The extra fields the API server puts in a TokenReview's user for a token
// bound to a pod (a projected service-account token).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// maxOwnerDepth bounds the owner chain walked from the pod: pod → Job →
// JobSet → TrainJob is three hops; more is not a job's pod.
const maxOwnerDepth = 4

// errUnauthenticated: the request carries no token the API server vouches
// for with the planner's audience (401).
var errUnauthenticated = errors.New("unauthenticated")

// caller is who sent a report: the pod its token is bound to.
type caller struct {
	Namespace      string
	ServiceAccount string
	PodName        string
	PodUID         string
}

// authenticate asks the API server (TokenReview) whether the bearer token
// is valid for audience, and returns the pod it is bound to. A token the
// API server rejects, without the audience, expired, or not bound to a
// pod is errUnauthenticated; a failing TokenReview is another error (500).
func authenticate(ctx context.Context, c client.Client, authHeader, audience string) (caller, error) {
	token := bearerToken(authHeader)
	if token == "" {
		return caller{}, fmt.Errorf("%w: no bearer token in the Authorization header", errUnauthenticated)
	}
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := c.Create(ctx, tr); err != nil {
		return caller{}, fmt.Errorf("token review: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		msg := "the token is invalid or expired"
		if st.Error != "" {
			// The API server's reason names the audience or expiry
			// problem without echoing the token.
			msg = st.Error
		}
		return caller{}, fmt.Errorf("%w: %s", errUnauthenticated, msg)
	}
	if !hasAudience(st.Audiences, audience) {
		return caller{}, fmt.Errorf("%w: the token is not for audience %q", errUnauthenticated, audience)
	}
	ns, sa, err := serviceaccount.SplitUsername(st.User.Username)
	if err != nil {
		return caller{}, fmt.Errorf("%w: not a service-account token", errUnauthenticated)
	}
	pod, uid := first(st.User.Extra[extraPodName]), first(st.User.Extra[extraPodUID])
	if pod == "" || uid == "" {
		return caller{}, fmt.Errorf("%w: the token is not bound to a pod (use a projected service-account token)", errUnauthenticated)
	}
	return caller{Namespace: ns, ServiceAccount: sa, PodName: pod, PodUID: uid}, nil
}

func bearerToken(h string) string {
	parts := strings.Fields(h)
	if len(parts) != 2 || !strings.EqualFold(parts[0], "Bearer") {
		return ""
	}
	return parts[1]
}

func hasAudience(auds []string, want string) bool {
	// An empty list means the API server's own audiences were used, which
	// is what the planner asked not to accept.
	for _, a := range auds {
		if a == want {
			return true
		}
	}
	return false
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// forbidden is an authorisation refusal with a reason for the sender.
type forbidden struct{ msg string }

func (f *forbidden) Error() string { return f.msg }

// authorize checks that the caller's pod (the same UID as in its token:
// not a later pod reusing the name) belongs to job through its controller
// owner chain. The pod and its owners are read from the API server, never
// from the request. A refusal is a *forbidden; other errors are the API
// server's.
func authorize(ctx context.Context, r client.Reader, who caller, job JobRef) error {
	if who.Namespace != job.Namespace {
		return &forbidden{fmt.Sprintf("a pod in namespace %q cannot report for %s", who.Namespace, job)}
	}
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: who.Namespace, Name: who.PodName}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return &forbidden{fmt.Sprintf("pod %s/%s of the token no longer exists", who.Namespace, who.PodName)}
		}
		return fmt.Errorf("get pod %s/%s: %w", who.Namespace, who.PodName, err)
	}
	if string(pod.UID) != who.PodUID {
		return &forbidden{fmt.Sprintf("pod %s/%s is not the pod the token was issued to", who.Namespace, who.PodName)}
	}
	obj := metav1.Object(&pod)
	for range maxOwnerDepth {
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			break
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			break
		}
		if gv.Group == job.Group && ref.Kind == job.Kind && ref.Name == job.Name && string(ref.UID) == job.UID {
			return nil
		}
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, owner); err != nil {
			if apierrors.IsNotFound(err) {
				break
			}
			return fmt.Errorf("get owner %s %s/%s: %w", ref.Kind, pod.Namespace, ref.Name, err)
		}
		if owner.UID != ref.UID {
			break
		}
		obj = owner
	}
	return &forbidden{fmt.Sprintf("pod %s/%s does not belong to %s", pod.Namespace, pod.Name, job)}
}
