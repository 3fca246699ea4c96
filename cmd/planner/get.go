package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/progress-planner/planner/api/v1alpha1"
	"github.com/progress-planner/planner/internal/textsafe"
)

type getFlags struct {
	kube          kubeFlags
	allNamespaces bool
	wide          bool
}

// newGetCmd lists ProgressForecasts with the CRD's printer columns, so
// `kubectl planner get` reads like `kubectl get pf` without kubectl.
func newGetCmd() *cobra.Command {
	var fl getFlags
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List the planner's ProgressForecasts: progress, ETA, verdict, boost (as kubectl get pf)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runGet(cmd, name, &fl)
		},
	}
	fl.kube.add(cmd, "namespace (default: the context's namespace)")
	cmd.Flags().BoolVarP(&fl.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	cmd.Flags().BoolVar(&fl.wide, "wide", false, "add objective, advised boost, mode, Workload and reason (kubectl get pf -o wide)")
	return cmd
}

func runGet(cmd *cobra.Command, name string, fl *getFlags) error {
	if name != "" && fl.allNamespaces {
		return usageErrorf("a NAME cannot be combined with --all-namespaces")
	}
	c, ns, err := fl.kube.client()
	if err != nil {
		return err
	}
	var items []v1alpha1.ProgressForecast
	if name != "" {
		var pf v1alpha1.ProgressForecast
		if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, &pf); err != nil {
			return fmt.Errorf("ProgressForecast %s/%s: %w", ns, name, err)
		}
		items = append(items, pf)
	} else {
		var l v1alpha1.ProgressForecastList
		var opts []client.ListOption
		if !fl.allNamespaces {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(cmd.Context(), &l, opts...); err != nil {
			return fmt.Errorf("list ProgressForecasts: %w", err)
		}
		items = l.Items
	}
	if len(items) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No ProgressForecasts found in %s.\n", map[bool]string{true: "any namespace", false: ns + " namespace"}[fl.allNamespaces])
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
	// The columns of kubectl get pf (the CRD's printer columns).
	head := []string{"NAME", "KIND", "PROGRESS", "ETA", "VERDICT", "BOOST", "METRIC", "PREDICTED", "AGE"}
	if fl.wide {
		head = slices.Insert(head, 2, "JOB")
		head = append(head, "OBJECTIVE", "ADVISED", "MODE", "WORKLOAD", "REASON")
	}
	if fl.allNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	now := time.Now()
	for _, pf := range items {
		st := pf.Status
		var fs v1alpha1.ForecastSummary
		if st.Forecast != nil {
			fs = *st.Forecast
		}
		row := []string{pf.Name, pf.Spec.JobRef.Kind, fs.Progress, fs.ETA, st.Verdict, fmt.Sprint(st.Boost), fs.Current, fs.Predicted,
			duration.HumanDuration(now.Sub(pf.CreationTimestamp.Time))}
		if fl.wide {
			row = slices.Insert(row, 2, pf.Spec.JobRef.Name)
			row = append(row, st.Objective, fmt.Sprint(st.AdvisedBoost), st.Mode, st.Workload, st.Reason)
		}
		if fl.allNamespaces {
			row = append([]string{pf.Namespace}, row...)
		}
		for i, v := range row {
			if v == "" {
				v = "<none>"
			}
			// Status text is tenant-influenced: escaped for the terminal.
			row[i] = strings.ReplaceAll(textsafe.Line(v), "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}
