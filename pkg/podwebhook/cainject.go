package podwebhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CAInjector keeps the endpoint's CA bundle in the caBundle of every
// webhook of the MutatingWebhookConfiguration, so that the apiserver
// trusts the webhook (pods get the bundle from the webhook itself,
// CAAnnotation). It polls: the CA changes about once in ten years, and a
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

// Sync writes the current bundle once.
func (c *CAInjector) Sync(ctx context.Context) error {
	ca := c.CA()
	if len(ca) == 0 {
		return errors.New("CA bundle not loaded yet")
	}
	return c.syncWebhook(ctx, ca)
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
