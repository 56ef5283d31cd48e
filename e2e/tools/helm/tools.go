//go:build tools

// Package tools pins the helm command for e2e/build-binaries.sh; it is never compiled on its own.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
