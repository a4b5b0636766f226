"""A process's HTTP endpoints for its orchestrator: `/metrics`, `/healthz`, `/readyz`.

One app per process (`trainops controller`, `trainops gitops`), fed by the `kube.Manager`'s
`problems()` and the Prometheus registries of the process's components (the Manager's own
cache metrics among them).

`/healthz` answers 200 while the event loop answers at all (a liveness probe must not restart
a process that is merely waiting for its lease). `/readyz` answers 200 only when every
informer has synced and no supervised loop is crashing; otherwise 503 with one line per
problem, as kube-apiserver's own `/readyz?verbose` lists failed checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.exposition import generate_latest

__all__ = ["add_routes", "create_app", "metrics_body", "serve"]


def metrics_body(registries: Iterable[CollectorRegistry]) -> bytes:
    """Every registry's metrics in the text exposition format, one after the other (their
    names must not overlap: each component prefixes its own)."""
    return b"".join(generate_latest(r) for r in registries)


def create_app(
    registries: Iterable[CollectorRegistry], problems: Callable[[], dict[str, str]]
) -> web.Application:
    """An app of its own with the three routes (`add_routes`)."""
    served = list(registries)
    app = web.Application()
    add_routes(app, lambda: served, problems)
    return app


def add_routes(
    app: web.Application,
    registries: Callable[[], Iterable[CollectorRegistry]],
    problems: Callable[[], dict[str, str]],
) -> None:
    """`/metrics` (every registry `registries()` gives at scrape time), `/healthz`, `/readyz`
    on `app`, named `metrics`, `healthz` and `readyz` (another app's access rules name them)."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=metrics_body(registries()), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        found = problems()
        if not found:
            return web.Response(text="ok")
        lines = [f"[-] {name}: {why}" for name, why in sorted(found.items())]
        return web.Response(status=503, text="\n".join([*lines, "readyz check failed"]) + "\n")

    app.router.add_get("/metrics", metrics, name="metrics")
    app.router.add_get("/healthz", healthz, name="healthz")
    app.router.add_get("/readyz", readyz, name="readyz")


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve `app` on `host:port` (0: a free port); the runner (to `cleanup()`) and the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)
