//go:build tools

// Package controlplane pins the Kubernetes commands the test control plane is built from, so go.mod
// and go.sum hold every module they need (`go build k8s.io/kubernetes/cmd/...` from this module).
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
