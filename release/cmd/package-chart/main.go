// Command package-chart is `helm lint` then `helm package` with the Helm
// SDK (helm.sh/helm/v3): make release packages the charts with it.
//
//	go run ./cmd/package-chart -out DIR CHART_DIR...
package main

import (
	"flag"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

func main() {
	out := flag.String("out", ".", "directory for the packaged charts")
	flag.Parse()
	for _, dir := range flag.Args() {
		if err := pack(dir, *out); err != nil {
			fmt.Fprintln(os.Stderr, "package-chart:", err)
			os.Exit(1)
		}
	}
}

func pack(dir, out string) error {
	l := lint.All(dir, map[string]any{}, "default", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			return fmt.Errorf("helm lint %s: %s", dir, m)
		}
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return err
	}
	file, err := chartutil.Save(ch, out)
	if err != nil {
		return err
	}
	fmt.Println(file)
	return nil
}
