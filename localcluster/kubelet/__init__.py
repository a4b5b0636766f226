"""The process kubelet: runs the pods bound to one local node as local processes.

Entry point: `localcluster.kubelet.local.start_node(kubeconfig, data_dir)` (kubelet, scheduler,
Deployment controller). Pure modules (`expansion`, `launch`, `status`, `restart`, `probes`,
`hooks`, `logs`, `volumes` planning, `ports`, `events`, `node` builders, `deployments`
planning) import nothing that does I/O, so this package deliberately re-exports nothing: importing
it must not pull in the Kubernetes client. See docs/KUBELET.md.
"""
