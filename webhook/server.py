"""Running the webhook: the HTTPS listener, its lifetime, and an optional companion task.

`start()` returns a handle to a running server (tests use it with port 0 and read the bound
port); `serve()` runs one until SIGTERM/SIGINT; `run()` is the blocking entry point for the CLI.

The listener is created by `kube.connlimits.ConnectionGuard.listen` rather than an aiohttp
site: the guard holds every connection to deadlines (TLS handshake, request head, idle
keep-alive) and to caps per source address and in total that slow clients cannot exhaust
(`ServerConfig.limits`, docs/WEBHOOK.md "Bad input and limits").

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
from aiohttp.http_exceptions import HttpProcessingError

from kube.connlimits import ConnectionGuard, ConnectionLimits
from kube.handshakes import TLSListener
from webhook.app import METRICS, Readiness, Settings, create_app, dispatcher
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
    shutdown_timeout: float = 10.0
    shutdown_delay: float = 5.0
    # Deadlines and connection caps. `max_connections` (100): each connection costs up to ~1.1
    # MiB while a large body is on its way — asyncio's TLS layer alone allocates a 256 KiB
    # read buffer per connection and reads 256 KiB at a time (docs/PERFORMANCE.md) — so 100
    # keep a flood of large reviews under deploy/'s 256 Mi with the ~50 MiB the process needs
    # idle; a connection over a cap takes the slot of one not being served (kube.connlimits).
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)

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
    server: asyncio.Server | TLSListener
    tls: ReloadingTLS
    guard: ConnectionGuard

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self.server.close()
        await self.runner.cleanup()


READ_BUFSIZE = 16 * 1024
"""aiohttp's read buffer per connection (its default is 256 KiB, and it buffers up to twice
that of a body nobody reads yet): a large review waiting for a lane (webhook.app) then holds
~32 KiB here instead of ~600 KiB, so waiting connections cost little memory."""


TLS_READ_HIGH_WATER = 16 * 1024
"""Decrypted bytes asyncio's TLS layer holds per connection before it stops reading the socket
(its default is 256 KiB): with aiohttp's 16 KiB buffer, a connection whose body waits for a
lane (webhook.app) holds some 300 KiB instead of ~1 MiB, the rest waiting in the kernel and the
client."""


class _DirectRunner(web.AppRunner):
    """The application's lifecycle (startup, cleanup contexts, graceful shutdown), with its
    routes served by `webhook.app.dispatcher` on aiohttp's low-level `web.Server` instead of
    through the application's router and request factory (~5 µs less per request), each
    request reported to the connection guard."""

    def __init__(self, app: web.Application, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._guard = guard
        self._server_options = {k: v for k, v in kwargs.items() if k != "shutdown_timeout"}

    async def _make_server(self) -> web.Server:
        await super()._make_server()  # starts the application; its own handler is not used
        handler = self._guard.wrap_handler(dispatcher(self.app))
        return web.Server(handler, **self._server_options)


class _MalformedRequests(logging.Filter):
    """aiohttp logs a request it cannot parse (a request line over 8 KiB, bad HTTP) as an
    ERROR with a traceback, and any client that reaches the port can send one: one WARNING line
    naming the client's error instead (the answer, a 400, is aiohttp's as before)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            reason = " ".join(str(exc.message).split())[:200]
            record.args = (record.getMessage(), type(exc).__name__, reason)
            record.msg = "%s: %s %s"
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


_MALFORMED = _MalformedRequests()


def _small_tls_reads(transport: asyncio.BaseTransport) -> None:
    set_limits = getattr(transport, "set_read_buffer_limits", None)
    if set_limits is not None:  # the TLS transports of asyncio (Python ≥ 3.11) and uvloop
        set_limits(high=TLS_READ_HIGH_WATER)


async def start(config: ServerConfig, *, readiness: Readiness | None = None) -> RunningServer:
    """Load the certificate pair and start listening (port 0 picks a free port)."""
    tls = ReloadingTLS(config.cert_file, config.key_file, interval=config.reload_interval)
    logging.getLogger("aiohttp.server").addFilter(_MALFORMED)  # (once: a set of filters)
    app = create_app(config.settings, tls=tls, readiness=readiness)
    guard = ConnectionGuard(config.limits, name="webhook")
    app[METRICS].connections(guard.open_by_phase, lambda: dict(guard.stats))
    runner = _DirectRunner(
        app,
        guard,
        keepalive_timeout=config.limits.keepalive_backstop,
        lingering_time=config.settings.linger_timeout,
        shutdown_timeout=config.shutdown_timeout,
        access_log=None,
        read_bufsize=READ_BUFSIZE,
    )
    await runner.setup()
    assert runner.server is not None
    try:
        server = await guard.listen(
            runner.server,
            config.host,
            config.port,
            ssl=tls.context,
            setup_transport=_small_tls_reads,
        )
    except BaseException:
        await runner.cleanup()
        raise
    return RunningServer(app, runner, server, tls, guard)


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
        "webhook listening on https://%s:%d (certificate serial %x, event loop %s)",
        config.host,
        running.port,
        running.tls.serial,
        type(loop).__module__.split(".")[0],
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
    """The `trainops webhook` process: on uvloop, whose event loop and TLS transport cost
    14–17 µs less CPU per admission request than asyncio's (docs/WEBHOOK.md)."""
    import uvloop  # only this process needs it

    uvloop.run(serve(config, companion=companion))
    return 0
