//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/pkg/kueueext"
	"github.com/progress-planner/planner/pkg/offline"
	"github.com/progress-planner/planner/test/framework"
)

// TestLiveForecastOnRealAPIServer stores a ProgressForecast (CRD installed
// from config/crd/bases) in a real kube-apiserver, as the controller does,
// and runs `planner forecast --trainjob` against it through a kubeconfig.
func TestLiveForecastOnRealAPIServer(t *testing.T) {
	env := framework.Start(t, framework.Options{ExtraCRDPaths: []string{"../../config/crd/bases"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.CreateNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	t0 := float64(now.Unix()) - 1000
	pf := livePF(t, t0, 100)
	pf.Spec.JobRef = v1alpha1.JobRef{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama"}
	st := pf.Status
	c, err := client.New(env.Config, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, pf); err != nil {
		t.Fatalf("create ProgressForecast: %v", err)
	}
	pf.Status = st
	if err := c.Status().Update(ctx, pf); err != nil {
		t.Fatalf("write status: %v", err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"forecast", "--trainjob", "team-a/llama", "--kubeconfig", kubeconfig, "-o", "json"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("planner forecast --trainjob: %v (%s)", err, errOut.String())
	}
	var got offline.Output
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if got.Name != "team-a/llama" || got.AtBasis != "now" || got.Objective.Metric != "loss" || got.Decision.Reason == "" {
		t.Errorf("unexpected output: %s", out.String())
	}
	if !got.Forecast.ETA.Known && !got.Forecast.Hung {
		t.Errorf("no ETA and not hung: %+v", got.Forecast.ETA)
	}
	t.Logf("live forecast of team-a/llama: verdict %s, ETA known %v, hung %v", got.Decision.Verdict, got.Forecast.ETA.Known, got.Forecast.Hung)

	root = newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"forecast", "--trainjob", "team-a/missing", "--kubeconfig", kubeconfig})
	err = root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "team-a/missing") || exitCode(err) != 1 {
		t.Errorf("missing ProgressForecast: err %v, exit %d", err, exitCode(err))
	}
	_ = os.Remove(kubeconfig)
}
