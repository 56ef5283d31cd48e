//go:build tools

// Package tools pins the Kueue manager for e2e/build-binaries.sh; it is never compiled on its own.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
