//go:build tools

// The commands hack/build-older.sh builds at this version; importing them keeps
// `go mod tidy` from dropping their dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
