//go:build e2e

// Package framework starts a real control plane for integration and e2e
// tests: kube-apiserver and etcd built from pinned modules by
// hack/build-testbins.sh (make testbins), driven by controller-runtime's
// envtest, with the CRDs of Kueue v0.17.0, Kubeflow Trainer v2.2.0 and JobSet
// installed from the module cache, and the real Kueue controllers, scheduler
// and webhooks running in-process (as Kueue's own integration tests run
// them) with the PriorityBoost feature gate on and the TrainJob and JobSet
// integrations enabled.
//
// Every file carries the e2e build tag, so `go test ./...` neither builds
// this package nor needs the binaries. Run the suites with `make e2e`.
//
// What the control plane is not: no kube-controller-manager and no
// kube-scheduler or kubelet run. Nothing creates or runs pods, and
// owner-reference garbage collection does not happen (deleting a TrainJob
// leaves its Workload behind). Tests that need either clean up themselves;
// every Env is a fresh apiserver, so most tests need no cleanup at all.
package framework
