package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/pkg/kueueext"
)

// kubeFlags are the kubectl connection flags, the same in every command
// that talks to a cluster: --kubeconfig, --context and, for the commands
// that read a namespace (report, explain), -n/--namespace.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

// add declares the flags on cmd; namespaceHelp "" leaves out -n (the
// command names its objects otherwise, or watches every namespace).
// scope ("" for none) prefixes the help, e.g. "with --trainjob: ".
func (k *kubeFlags) add(cmd *cobra.Command, namespaceHelp string) {
	k.addScoped(cmd, "", namespaceHelp)
}

func (k *kubeFlags) addScoped(cmd *cobra.Command, scope, namespaceHelp string) {
	f := cmd.Flags()
	f.StringVar(&k.kubeconfig, "kubeconfig", "", scope+"kubeconfig file (default: $KUBECONFIG, in-cluster, or ~/.kube/config)")
	f.StringVar(&k.context, "context", "", scope+"kubeconfig context to use")
	if namespaceHelp != "" {
		f.StringVarP(&k.namespace, "namespace", "n", "", namespaceHelp)
	}
}

// restConfig is the client config the flags select.
func (k *kubeFlags) restConfig() (*rest.Config, error) { return restConfig(k.kubeconfig, k.context) }

// client connects like kubectl and returns a reader for the planner's
// kinds and the namespace to use: -n, else the context's namespace.
func (k *kubeFlags) client() (client.Client, string, error) {
	rc, err := k.restConfig()
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
