"""The real Kubernetes control plane for the real tier of the tests (issue 30): a Go module (go.mod,
tools.go, cmd/etcd) that builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
from source, and the Python that builds, caches, starts and stops them (binaries, pki, cluster)."""
