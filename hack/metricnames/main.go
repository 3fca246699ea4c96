// Command metricnames prints the name of every metric `planner run`
// registers, one a line, taken from controller-runtime's registry (the one
// its metrics endpoint serves) after the planner's own collectors are
// registered. The release module's tests check the alert rules and the
// Grafana dashboard against it (release/observability).
package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	_ "sigs.k8s.io/controller-runtime/pkg/manager" // its metrics (workqueue, REST client, leader election) register at init
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/progress-planner/planner/pkg/kueueext"
)

// Desc has no accessor for its name; its String() starts with it.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func main() {
	kueueext.RegisterMetrics()
	coll, ok := ctrlmetrics.Registry.(prometheus.Collector)
	if !ok {
		fmt.Fprintln(os.Stderr, "metricnames: controller-runtime's registry is not a prometheus.Collector")
		os.Exit(1)
	}
	ch := make(chan *prometheus.Desc)
	go func() { coll.Describe(ch); close(ch) }()
	seen := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	// Histograms and summaries are exposed as NAME_bucket, NAME_sum and
	// NAME_count as well; the checker accepts those suffixes on a listed name.
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}
}
