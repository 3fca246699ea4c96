//go:build e2e

package framework

import "path/filepath"

// ServiceAccountSigningKeyFile is the PEM (PKCS#8) key kube-apiserver signs
// service-account tokens with (envtest writes it next to its serving
// certificate). Tests use it to forge a token the API server would issue
// but which has expired: the TokenRequest API refuses lifetimes under ten
// minutes.
func (e *Env) ServiceAccountSigningKeyFile() string {
	return filepath.Join(e.testEnv.ControlPlane.APIServer.CertDir, "sa-signer.key")
}
