// Command etcd is etcd's own server entry point, built from the Go module proxy at the version
// go.mod pins (the etcd repository's main package is not a module that `go build` can name).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
