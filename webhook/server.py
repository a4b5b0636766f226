"""Running the webhook: the HTTPS listener, its lifetime, and an optional companion task.

`start()` returns a handle to a running server (tests use it with port 0 and read the bound
port); `serve()` runs one until SIGTERM/SIGINT; `run()` is the blocking entry point for the CLI.

The listener is created with `loop.create_server` rather than an aiohttp site so the TLS
handshake gets its own deadline (`handshake_timeout`): a client that opens a TCP connection and
never finishes the handshake is dropped instead of holding a slot.

The companion (the in-cluster certificate manager, when `--manage-certs` is on) is wired in by
the CLI: `prepare()` runs before the listener starts (it writes the first certificate files),
`run()` runs alongside the server. The webhook package itself knows nothing about Secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from webhook.app import Readiness, Settings, create_app
from webhook.tls import ReloadingTLS

__all__ = ["Companion", "RunningServer", "ServerConfig", "run", "serve", "start"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    cert_dir: Path
    host: str = "0.0.0.0"
    port: int = 8443
    settings: Settings = field(default_factory=Settings)
    reload_interval: float = 1.0
    handshake_timeout: float = 10.0
    shutdown_timeout: float = 10.0
    shutdown_delay: float = 5.0

    @property
    def cert_file(self) -> Path:
        return Path(self.cert_dir) / "tls.crt"

    @property
    def key_file(self) -> Path:
        return Path(self.cert_dir) / "tls.key"


class Companion(Protocol):
    async def prepare(self, readiness: Readiness) -> None: ...

    async def run(self, readiness: Readiness) -> None: ...


@dataclass
class RunningServer:
    """A started webhook server; `close()` stops accepting and drains in-flight requests."""

    app: web.Application
    runner: web.AppRunner
    server: asyncio.Server
    tls: ReloadingTLS

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self.server.close()
        await self.runner.cleanup()


async def start(config: ServerConfig, *, readiness: Readiness | None = None) -> RunningServer:
    """Load the certificate pair and start listening (port 0 picks a free port)."""
    tls = ReloadingTLS(config.cert_file, config.key_file, interval=config.reload_interval)
    app = create_app(config.settings, tls=tls, readiness=readiness)
    runner = web.AppRunner(
        app,
        keepalive_timeout=config.settings.idle_timeout,
        lingering_time=config.settings.linger_timeout,
        shutdown_timeout=config.shutdown_timeout,
        access_log=None,
    )
    await runner.setup()
    assert runner.server is not None
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(
            runner.server,
            config.host,
            config.port,
            ssl=tls.context,
            ssl_handshake_timeout=config.handshake_timeout,
            reuse_address=True,
            backlog=1024,
        )
    except BaseException:
        await runner.cleanup()
        raise
    return RunningServer(app, runner, server, tls)


async def serve(config: ServerConfig, *, companion: Companion | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain.

    On a signal the webhook first reports unready and keeps serving for `shutdown_delay`
    seconds: the API server keeps sending calls to a terminating pod until the endpoint removal
    reaches it, and with `failurePolicy: Fail` a refused connection in that window would fail a
    user's request. Then it stops accepting and waits for in-flight requests.
    """
    readiness = Readiness()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if companion is not None:
        readiness.block("certificates", "certificate manager has not finished its first pass")
        if not await _until_stopped(companion.prepare(readiness), stop):
            return
    running = await start(config, readiness=readiness)
    log.info(
        "webhook listening on https://%s:%d (certificate serial %x)",
        config.host,
        running.port,
        running.tls.serial,
    )
    side = asyncio.create_task(companion.run(readiness)) if companion else None
    try:
        await stop.wait()
        readiness.block("shutdown", "terminating")
        log.info("shutting down in %gs", config.shutdown_delay)
        await asyncio.sleep(config.shutdown_delay)
    finally:
        if side is not None:
            side.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await side
        await running.close()


async def _until_stopped(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `work` unless `stop` is set first (then cancel it). True when `work` finished."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait((task, stopper), return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


def run(config: ServerConfig, *, companion: Companion | None = None) -> int:
    asyncio.run(serve(config, companion=companion))
    return 0
