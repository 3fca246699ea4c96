package podwebhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/progressendpoint"
)

// CAInjector keeps the endpoint's CA bundle where it is needed: in the
// caBundle of every webhook of the MutatingWebhookConfiguration (so the
// apiserver trusts the webhook) and in the ConfigMap CAConfigMapName of
// every opted-in namespace (so pods trust the endpoint). It polls: the CA
// changes about once in ten years and namespaces opt in rarely, and a
// poll also repairs hand edits.
type CAInjector struct {
	Client client.Client
	// CA returns the current PEM bundle; nil until it is loaded.
	CA func() []byte
	// WebhookConfiguration is the MutatingWebhookConfiguration's name.
	WebhookConfiguration string
	// Interval between syncs (default 30 seconds).
	Interval time.Duration
	Log      logr.Logger
}

// Start syncs now and every Interval until ctx ends (manager.Runnable).
func (c *CAInjector) Start(ctx context.Context) error {
	iv := c.Interval
	if iv <= 0 {
		iv = 30 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil {
			c.Log.Error(err, "progress endpoint CA injection")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: one writer is enough; every replica's CertManager
// loads the same Secret, so the leader's bundle is everyone's.
func (c *CAInjector) NeedLeaderElection() bool { return true }

// Sync writes the current bundle once. Every target is tried; the errors
// are joined.
func (c *CAInjector) Sync(ctx context.Context) error {
	ca := c.CA()
	if len(ca) == 0 {
		return errors.New("CA bundle not loaded yet")
	}
	errs := []error{c.syncWebhook(ctx, ca)}
	var nss corev1.NamespaceList
	if err := c.Client.List(ctx, &nss, client.MatchingLabels{OptInLabel: OptInValue}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list opted-in namespaces: %w", err))...)
	}
	for _, ns := range nss.Items {
		errs = append(errs, c.syncConfigMap(ctx, ns.Name, ca))
	}
	return errors.Join(errs...)
}

func (c *CAInjector) syncWebhook(ctx context.Context, ca []byte) error {
	var wc admissionregv1.MutatingWebhookConfiguration
	if err := c.Client.Get(ctx, client.ObjectKey{Name: c.WebhookConfiguration}, &wc); err != nil {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", c.WebhookConfiguration, err)
	}
	base := wc.DeepCopy()
	changed := false
	for i := range wc.Webhooks {
		if !bytes.Equal(wc.Webhooks[i].ClientConfig.CABundle, ca) {
			wc.Webhooks[i].ClientConfig.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := c.Client.Patch(ctx, &wc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch caBundle of MutatingWebhookConfiguration %s: %w", c.WebhookConfiguration, err)
	}
	c.Log.Info("webhook caBundle updated", "mutatingWebhookConfiguration", c.WebhookConfiguration)
	return nil
}

func (c *CAInjector) syncConfigMap(ctx context.Context, ns string, ca []byte) error {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: ns, Name: CAConfigMapName}
	err := c.Client.Get(ctx, key, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CAConfigMapName},
			Data:       map[string]string{progressendpoint.KeyCACert: string(ca)},
		}
		if err := c.Client.Create(ctx, &cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s: %w", key, err)
		}
		c.Log.Info("CA bundle ConfigMap created", "configMap", key.String())
		return nil
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", key, err)
	case cm.Data[progressendpoint.KeyCACert] == string(ca):
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[progressendpoint.KeyCACert] = string(ca)
	if err := c.Client.Update(ctx, &cm); err != nil {
		return fmt.Errorf("update ConfigMap %s: %w", key, err)
	}
	c.Log.Info("CA bundle ConfigMap updated", "configMap", key.String())
	return nil
}
