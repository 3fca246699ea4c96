package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/progress-planner/planner/pkg/plannerconfig"
	"github.com/progress-planner/planner/pkg/reportui"
)

// addReportUI adds the read-only report page (--ui-addr) to the manager:
// it reads the controller's cache and, for ClusterQueues (not cached), the
// API server directly.
func addReportUI(mgr manager.Manager, cfg plannerconfig.Config, fl runFlags, log logr.Logger) error {
	if fl.uiAddr == "" {
		return nil
	}
	if fl.uiRefresh <= 0 {
		return usageErrorf("--ui-refresh %v: want a positive duration", fl.uiRefresh)
	}
	s := reportui.New(mgr.GetClient(), mgr.GetAPIReader(), reportui.Options{Addr: fl.uiAddr, Refresh: fl.uiRefresh,
		GPUResource: cfg.GPUResourceName(), Log: log.WithName("report-page")})
	if err := mgr.Add(s); err != nil {
		return fmt.Errorf("add the report page: %w", err)
	}
	return nil
}
