module k8s.io/sample-cli-plugin

go 1.23.0
