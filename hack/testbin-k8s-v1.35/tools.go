//go:build tools

// Package tools records the main packages this module exists to build, so
// that `go mod tidy` keeps their dependencies. The build tag keeps the file
// out of every normal build (main packages cannot be imported).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"            // etcd (server/v3's root package is main in v3.6.x)
	_ "k8s.io/kubernetes/cmd/kube-apiserver" // kube-apiserver
)
