package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/kueueext"
)

// kubeFlags are the standard kubectl connection flags of the read-only
// commands (report, explain): --kubeconfig, --context, -n/--namespace.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) add(cmd *cobra.Command, namespaceHelp string) {
	f := cmd.Flags()
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster, or ~/.kube/config)")
	f.StringVar(&k.context, "context", "", "kubeconfig context to use")
	f.StringVarP(&k.namespace, "namespace", "n", "", namespaceHelp)
}

// client connects like kubectl and returns a reader for the planner's
// kinds and the namespace to use: -n, else the context's namespace.
func (k *kubeFlags) client() (client.Client, string, error) {
	rc, err := restConfig(k.kubeconfig, k.context)
	if err != nil {
		return nil, "", err
	}
	return k.clientFor(rc)
}

func (k *kubeFlags) clientFor(rc *rest.Config) (client.Client, string, error) {
	c, err := client.New(rc, client.Options{Scheme: kueueext.NewScheme()})
	if err != nil {
		return nil, "", fmt.Errorf("client: %w", err)
	}
	return c, k.defaultNamespace(), nil
}

// defaultNamespace is -n, else the kubeconfig context's namespace, else
// "default" (as kubectl resolves it).
func (k *kubeFlags) defaultNamespace() string {
	if k.namespace != "" {
		return k.namespace
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context}).Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}
