"""The embedded Kubernetes-compatible API server and the process node, in layers.

Server side, lowest first (import-linter enforces the direction, see docs/ARCHITECTURE.md):
`api` (the vocabulary) < `store` (SQLite, event log, watch fan-out) < `schema` (OpenAPI,
structural schemas, CEL) < `admission` (webhook chain) < `write` (the write pipeline) <
`http` (aiohttp app and handlers) and `controllers` (in-process controllers) < `apiserver`
(composition). Node side: `kubelet` runs pods, with the scheduler and the Deployment
controller from `controllers`; it reaches the server through `client` only (over HTTP).
"""
