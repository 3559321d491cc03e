// Command etcd is etcd's own server entry point, built from go.etcd.io/etcd/server/v3 at the
// version Kubernetes pins, so the test control plane needs no prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
