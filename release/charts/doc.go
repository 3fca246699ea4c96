// Package charts holds the tests of the Helm charts in charts/: helm lint
// and golden `helm template` renders through the Helm Go SDK (a nested
// module keeps Helm's dependency tree out of the product's go.mod). The
// golden files are what test/e2e installs on the real control plane.
package charts
