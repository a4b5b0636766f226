// Command etcd is etcd's server entry point, built from the Go module proxy at the version go.mod
// pins, for the kind node image's etcd image.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
