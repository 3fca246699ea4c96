// Package krew validates the kubectl plugin's krew manifest with krew
// v0.4.3's own validator (sigs.k8s.io/krew/cmd/validate-krew-manifest:
// structure, name, version, platforms, overlapping selectors). Its install
// step downloads the archives, so it is skipped here; make release runs the
// validator on the released manifest, whose archives exist.
package krew
