"""Serving the GitOps API (and the dashboard mounted on it): one listener whose every connection
is held to `kube.connlimits` — the request head within a deadline, idle keep-alive connections
closed, caps per source and in total that slow clients cannot exhaust."""

from __future__ import annotations

import logging

from aiohttp import web

from gitops.api.auth import is_loopback
from gitops.api.state import SETTINGS
from kube.connlimits import ConnectionGuard, ConnectionLimits

__all__ = ["API_LIMITS", "CONNECTIONS", "serve"]

log = logging.getLogger("gitops.api")


API_LIMITS = ConnectionLimits(
    max_connections=512, max_per_source=256, header_timeout=10.0, idle_timeout=120.0
)
"""The API's and dashboard's connections (`kube.connlimits`): a request head must arrive within
10 s and an idle keep-alive connection goes after 120 s, so slow clients cannot hold the slots;
a connection over a cap takes the slot of one not being served. Open event streams and log
follows count against the caps but are never cut (bounded by `max_streams`). The per-source cap
is high: behind an Ingress every user comes from the proxy's address."""


CONNECTIONS = web.AppKey("gitops_api_connections", ConnectionGuard)
"""The app's connection guard (`kube.connlimits`): made with the app, listened through by `serve`."""


async def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    shutdown_timeout: float = 5.0,
) -> tuple[web.AppRunner, int]:
    """Listen on `host:port` (0: a free port), every connection held to the app's connection
    limits (`create_app(limits=…)`); the runner (stop it with `runner.cleanup()`) and the port.
    A non-loopback `host` needs an app built with `allow_remote_writes`."""
    if not is_loopback(host) and not app[SETTINGS].allow_remote_writes:
        raise ValueError(
            f"the API would listen on {host or 'every interface'}, beyond loopback: that needs "
            "a token (allow_remote_writes)"
        )
    if not is_loopback(host) and app[SETTINGS].webhook_secret is None:
        log.warning(
            "the push webhook on %s has no secret: anyone who reaches it may trigger refreshes",
            host or "every interface",
        )
    guard = app[CONNECTIONS]
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=guard.limits.keepalive_backstop,
    )
    await runner.setup()
    try:
        site = _GuardedSite(runner, guard, host, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    actual = port
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            actual = int(address[1])
            break
    return runner, actual


class _GuardedSite(web.BaseSite):
    """A TCP site whose listener is `ConnectionGuard.listen`'s, so the runner stops it."""

    def __init__(self, runner: web.AppRunner, guard: ConnectionGuard, host: str, port: int) -> None:
        super().__init__(runner)
        self._guard, self._host, self._port = guard, host, port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await self._guard.listen(server, self._host, self._port)
