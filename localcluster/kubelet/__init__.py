"""The process kubelet: runs the pods bound to one local node as local processes.

Entry point: `localcluster.kubelet.local.start_node(kubeconfig, data_dir)` (the kubelet, plus
the scheduler and the Deployment controller from `localcluster.controllers`). Pure modules
(`expansion`, `launch`, `status`, `restart`, `probes`, `hooks`, `logs`, `volumes` planning,
`ports`, `node` builders, `podnet`, `hostsfile`, `images`) import nothing that does I/O, so
this package deliberately re-exports nothing: importing it must not pull in the Kubernetes
client. It reaches the API server through
`localcluster.client` only. See docs/KUBELET.md.
"""
