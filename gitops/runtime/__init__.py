"""The GitOps runtime: the reconciler and everything that talks to the cluster for it.

It owns the per-repository round (`reconciler`: fetch, pre-flight, compare, sync, status), its
wiring in one process (`manager`: the shared informer cache, the work queue, leader election,
`fairness` between namespaces, the `hub.Hub` the API reads), whom each repository acts as
(`acting`), the live objects (`livecache`, `livestate`, `discovery`), applies and prunes
(`sync`, `operations`), status writes (`statuswrite`), what a round remembers (`memo`) and the
metrics (`metrics`). The decisions are the engine's; this package carries them out.
"""
