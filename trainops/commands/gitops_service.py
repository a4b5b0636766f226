"""The GitOps component, wired once: what `trainops gitops` and `trainops up` both run.

Wiring only. `component` builds the reconciler (`gitops.runtime.manager.GitOpsReconciler`, its loops
leader-elected by its settings) and one aiohttp application over it: the HTTP API and push hook
(`gitops.api.routes`, every request authenticated with a TokenReview and authorized with a
SubjectAccessReview, `gitops.api.reviews.KubeAccess`), the dashboard (`dashboard.install`) and the
probes — `/healthz` (the loop answers), `/readyz` (informers synced, no loop crashing) and
`/metrics`. The application is stateless over the reconciler's informer caches, so every replica
serves it; sync and refresh are writes to the JobRepository that the leader carries out
(`gitops.engine.triggers`). It lives here, not in `gitops/`, because `gitops/` may not import
`dashboard/`. Neither starts nor serves: the caller does (`reconciler.start()`, `gitops.api.routes.
serve`), so `up` can keep its loopback address and port file and `gitops` its `--bind`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

    from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
    from kube.manager import Manager

__all__ = ["PROBES", "Component", "component"]

PROBES = ("metrics", "healthz", "readyz")
"""Route names served without a token (as the controller's and the webhook's): a kubelet probe
and a Prometheus scrape carry none, and none of them shows a repository or a job."""


@dataclass
class Component:
    reconciler: GitOpsReconciler
    app: web.Application


def component(
    manager: Manager,
    cache_dir: str | os.PathLike[str],
    settings: GitOpsSettings,
    *,
    webhook_secret: bytes | None,
    allow_remote_writes: bool,
    registries: Sequence[Any] = (),
    trusted_proxies: Sequence[str] = (),
    stream_recheck: float = 30.0,
    stream_lifetime: float = 3600.0,
) -> Component:
    """The reconciler, added to `manager` (which the caller starts), and its application.
    `registries` are more Prometheus registries for `/metrics` besides the reconciler's and the
    Manager's own (`up`'s controller), read at each scrape."""
    import dashboard
    from gitops.api import routes as api
    from gitops.api.reviews import KubeAccess
    from gitops.api.rules import PUBLIC
    from gitops.runtime.manager import GitOpsReconciler

    client = manager.client
    reconciler = GitOpsReconciler(manager, cache_dir, settings)
    app = api.create_app(
        reconciler,
        token=None,
        webhook_secret=webhook_secret,
        allow_remote_writes=allow_remote_writes,
        access=KubeAccess(client),
        trusted_proxies=trusted_proxies,
        stream_recheck=stream_recheck,
        stream_lifetime=stream_lifetime,
    )
    # The curves are in the controller's namespace, which deploy/ and `up` make this one's.
    namespace = manager.leader_election.namespace
    dashboard.install(app, hub=reconciler, client=client, progress_namespace=namespace)
    _add_probes(app, manager, reconciler, registries)
    for name in PROBES:
        app[api.RULES][name] = PUBLIC
    return Component(reconciler, app)


def _add_probes(
    app: web.Application, manager: Manager, reconciler: GitOpsReconciler, more: Sequence[Any]
) -> None:
    from kube import probes

    def registries() -> list[Any]:
        own = [manager.metrics, reconciler.metrics.registry]
        return [*own, *(r for r in more if r is not None and r not in own)]

    probes.add_routes(app, registries, manager.problems)
