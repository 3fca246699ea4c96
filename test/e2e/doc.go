// Package e2e holds the end-to-end suites (build tag e2e): the planner,
// its CLI and its live page against a real kube-apiserver and etcd with
// the real Kueue in-process (test/framework). `make e2e` runs them;
// docs/testing.md says what each covers.
package e2e
