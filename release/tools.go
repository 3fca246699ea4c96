//go:build tools

// Package tools records main packages the release tooling runs, so that
// `go mod tidy` keeps them: krew's manifest validator (release/krew,
// hack/release.sh).
package tools

import (
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
