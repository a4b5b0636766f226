"""GitOps for training jobs: keep a cluster at what a Git repository says.

Four packages, one way down (import-linter enforces it: `pyproject.toml`):

- `gitops.api`: the HTTP API, the push hook, logins and live streams; reads what the runtime
  recorded, through the `gitops.runtime.hub.Hub` protocol.
- `gitops.runtime`: the reconciler and its wiring — the informer cache, the work queue and
  fairness, live state, applies and prunes, status writes. All I/O with the cluster is here.
- `gitops.source`: the bytes of a repository — git processes, the clone cache, checkouts,
  incremental blob reads, push payloads.
- `gitops.engine`: every decision, as pure functions over plain data (no I/O, no clock):
  manifests and pre-flight, pairing, compare, diff, health, order, guards, tenancy, status.

A round runs fetch (source) → pre-flight, pair, compare, health, diff (engine) → apply (runtime)
→ status (engine derives it, runtime writes it). docs/ARCHITECTURE.md draws it.
"""
