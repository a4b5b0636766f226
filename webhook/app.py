"""The aiohttp shell around `webhook.admission`: routes, limits, metrics, readiness.

The app's parts live in typed `web.AppKey`s; the two admission handlers get the settings and
metrics bound when the app is built instead (they run thousands of times a second, and every
lookup shows). The handler does the transport
work only — read the body under a deadline and a size limit, parse JSON (orjson: decoding and
encoding are a tenth of the CPU per request with the standard library), call the pure
`admission.review`, serialise, count — and maps each kind of bad input to a 4xx with a plain
message. A rejected *object* is not bad input: it is a 200 carrying `allowed: false`.

Limits (documented in docs/WEBHOOK.md):
- body: `max_body_bytes` (3 MiB plus 256 KiB of envelope by default: the API server refuses
  request bodies over 3 MiB and etcd stores objects of at most 1.5 MiB, so an UPDATE of a job
  that can exist carries at most two 1.5 MiB objects) — larger bodies get 413;
- large bodies (over `large_body_bytes`, 256 KiB by default, or of unknown length) take one of
  `large_concurrency` lanes (2 by default) for their read and review, and the review runs on a
  worker thread: a flood of large reviews then holds at most that many large bodies and their
  parsed objects in memory (the others wait unread, TCP flow control holding their bytes in
  the client), and the event loop keeps answering small reviews between the worker's GIL
  slices instead of queueing them behind every large one. A large request that finds no lane
  within `lane_timeout` seconds (the API server gives up after the webhook's timeoutSeconds,
  5 s in deploy/) gets 503;
- aiohttp's read buffer per connection is 16 KiB (`webhook.server.READ_BUFSIZE`, not its 256
  KiB default), and a body is held only by the handler reading it (`_buffered`, `_collect`),
  never cached on the request object a keep-alive connection keeps until its next request; what a
  connection still costs (TLS buffers) is bounded by `webhook.server`'s connection limit;
- body read: `body_timeout` seconds (5) after the headers arrived (for a large body: after it
  got its lane) — a client trickling its body gets 408 and the connection is closed;
- after a refused body (408, 413) the rest of it is read and dropped for at most
  `linger_timeout` seconds, so the client can read the answer, then the connection is closed;
- connections (TLS handshake, request head and idle deadlines, caps per source and in total)
  are held to `kube.connlimits` by the server (`webhook.server.ServerConfig.limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import orjson
from aiohttp import StreamReader, web
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from webhook import admission
from webhook.metrics import Metrics
from webhook.tls import ReloadingTLS

__all__ = [
    "METRICS",
    "READINESS",
    "SETTINGS",
    "TLS",
    "Metrics",
    "Readiness",
    "Settings",
    "create_app",
    "dispatcher",
]

log = logging.getLogger(__name__)

KiB = 1024
MiB = 1024 * KiB
ENVELOPE_BYTES = 256 * KiB
"""Room for the AdmissionReview around its objects (request metadata, userInfo, options)."""


@dataclass(frozen=True)
class Settings:
    """Limits and timeouts of the HTTP shell."""

    max_body_bytes: int = 3 * MiB + ENVELOPE_BYTES
    large_body_bytes: int = 256 * KiB
    large_concurrency: int = 2
    lane_timeout: float = 5.0
    body_timeout: float = 5.0
    linger_timeout: float = 2.0
    # Repeat the CRD schema check in /validate (see `admission.validate`); off because the API
    # server has always applied the schema before it calls a validating webhook.
    check_schema: bool = False
    # A namespace's enforced Pod Security level (webhook.namespaces), checked on CREATE.
    level_of: admission.LevelOf | None = None


class Readiness:
    """Why the webhook is not ready yet; ready when no reason is left.

    Parts of the process (the certificate manager) add a reason while they cannot serve
    correctly and remove it when they can. `/readyz` reports the reasons.
    """

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    def block(self, part: str, reason: str) -> None:
        self._reasons[part] = reason

    def clear(self, part: str) -> None:
        self._reasons.pop(part, None)

    @property
    def reasons(self) -> dict[str, str]:
        return dict(self._reasons)

    @property
    def ready(self) -> bool:
        return not self._reasons


Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
Routes = dict[str, tuple[str, Handler]]
"""Path -> (method, handler): the webhook's five fixed routes."""

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
READINESS = web.AppKey("readiness", Readiness)
TLS = web.AppKey("tls", ReloadingTLS)
ROUTES: web.AppKey[Routes] = web.AppKey("routes")


def create_app(
    settings: Settings | None = None,
    *,
    tls: ReloadingTLS | None = None,
    readiness: Readiness | None = None,
) -> web.Application:
    """The webhook application. With `tls`, its certificate files are watched while it runs."""
    settings = settings or Settings()
    app = web.Application(client_max_size=settings.max_body_bytes)
    metrics = Metrics()
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app[READINESS] = readiness or Readiness()
    if tls is not None:
        app[TLS] = tls
        metrics.certificate_expiry(lambda: tls.not_after.timestamp() - time.time())
        app.cleanup_ctx.append(_watch_certificates)
    lanes = _LargeLanes(settings)
    app.cleanup_ctx.append(lanes.context)
    routes: Routes = {
        "/mutate": ("POST", _admission_handler("mutate", settings, metrics, lanes)),
        "/validate": ("POST", _admission_handler("validate", settings, metrics, lanes)),
        "/healthz": ("GET", _healthz),
        "/readyz": ("GET", _readyz_handler(app[READINESS], tls)),
        "/metrics": ("GET", _metrics_handler(metrics)),
    }
    app[ROUTES] = routes
    for path, (method, handler) in routes.items():
        if method == "GET":
            app.router.add_get(path, handler)  # (and HEAD)
        else:
            app.router.add_route(method, path, handler)
    return app


def dispatcher(app: web.Application) -> Handler:
    """`app`'s routes as one handler for aiohttp's low-level `web.Server`, which the server
    (`webhook.server`) runs instead of the application's router: five fixed paths need no
    router, match info or response signals, and skipping them takes ~5 µs off every request
    (docs/WEBHOOK.md). Answers what the router would: 404 for another path, 405 (with `Allow`)
    for another method, HEAD like GET."""
    routes = app[ROUTES]

    async def dispatch(request: web.BaseRequest) -> web.StreamResponse:
        route = routes.get(request.path)
        if route is None:
            return web.Response(status=404, text="404: Not Found")
        method, handler = route
        if request.method != method and not (method == "GET" and request.method == "HEAD"):
            allow = "GET,HEAD" if method == "GET" else method
            return web.Response(
                status=405, text="405: Method Not Allowed", headers={"Allow": allow}
            )
        return await handler(request)

    return dispatch


async def _watch_certificates(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(app[TLS].watch(), name="tls-watch")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class _LargeLanes:
    """The lanes large requests take: a semaphore and a worker thread per lane."""

    def __init__(self, settings: Settings) -> None:
        self.semaphore = asyncio.Semaphore(settings.large_concurrency)
        self.executor: ThreadPoolExecutor | None = None
        self.size = settings.large_concurrency

    async def context(self, app: web.Application) -> AsyncIterator[None]:
        self.executor = ThreadPoolExecutor(self.size, thread_name_prefix="large-review")
        yield
        self.executor.shutdown(wait=False, cancel_futures=True)


def _admission_handler(
    endpoint: admission.Endpoint, settings: Settings, metrics: Metrics, lanes: _LargeLanes
) -> Handler:
    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        started = time.perf_counter()
        length = request.content_length
        try:
            if length is not None and length <= settings.large_body_bytes:
                content = request.content
                if content.is_eof():  # the usual case: the body came with the headers
                    body = _buffered(content, settings)
                else:
                    body = await _read_body(request, settings)
                answer = _answer(endpoint, body, settings)
            else:
                answer = await _large(request, endpoint, settings, lanes)
        except _Refused as refused:
            metrics.count(endpoint, "", "", refused.verdict)
            return refused.response
        finally:  # also for a client that went away mid-body
            metrics.observe(endpoint, time.perf_counter() - started)
        metrics.count(endpoint, answer.kind, answer.operation, answer.verdict)
        return web.Response(body=answer.body, content_type="application/json")

    return handle


async def _large(
    request: web.BaseRequest, endpoint: admission.Endpoint, settings: Settings, lanes: _LargeLanes
) -> _Answer:
    """Read and review a large request in a lane: bounded memory, the event loop kept free."""
    length = request.content_length
    if length is not None and length > settings.max_body_bytes:  # refused before taking a lane
        raise _Refused("too_large", _plain(413, _too_large(settings), True))
    try:
        async with asyncio.timeout(settings.lane_timeout):
            await lanes.semaphore.acquire()
    except TimeoutError:
        text = (
            f"too many large reviews in progress; none finished within {settings.lane_timeout:g}s"
        )
        raise _Refused("busy", _plain(503, text, True)) from None
    try:
        body = await _read_body(request, settings)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(lanes.executor, _answer, endpoint, body, settings)
    finally:
        lanes.semaphore.release()


@dataclass(slots=True)
class _Answer:
    body: bytes
    kind: str
    operation: str
    verdict: str


class _Refused(Exception):
    """A request answered with a 4xx before any admission work (`verdict` labels the metric)."""

    def __init__(self, verdict: str, response: web.Response) -> None:
        self.verdict = verdict
        self.response = response


async def _read_body(request: web.BaseRequest, settings: Settings) -> bytes:
    try:
        if request.content.is_eof():
            return _buffered(request.content, settings)
        async with asyncio.timeout(settings.body_timeout):
            return await _collect(request, settings.max_body_bytes)
    except TimeoutError:
        text = f"request body not received within {settings.body_timeout:g}s"
        raise _Refused("timeout", _plain(408, text, True)) from None
    except web.HTTPRequestEntityTooLarge:
        raise _Refused("too_large", _plain(413, _too_large(settings), True)) from None
    except ConnectionResetError:  # the client went away mid-body: nobody to answer, no error
        raise _Refused("client_gone", _plain(400, "connection closed mid-body", True)) from None


def _buffered(content: StreamReader, settings: Settings) -> bytes:
    """A body that has arrived whole, taken from aiohttp's buffer without awaiting (and, as
    with `_collect`, without keeping it on the request)."""
    body = content.read_nowait()
    if len(body) > settings.max_body_bytes:  # a chunked or compressed body of unknown length
        raise _Refused("too_large", _plain(413, _too_large(settings), True))
    return body


async def _collect(request: web.BaseRequest, limit: int) -> bytes:
    """The body, held only by the caller: `request.read()` also keeps it on the request, which
    aiohttp's connection handler references until the connection's next request arrives — a
    flood of keep-alive connections then held one 3 MiB body each, long after its answer."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(limit, size)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(settings: Settings) -> str:
    return f"request body larger than the limit of {settings.max_body_bytes} bytes"


def _answer(endpoint: admission.Endpoint, body: bytes, settings: Settings) -> _Answer:
    """Parse, review, serialise (synchronous: nothing here waits; safe on a worker thread —
    counting is left to the event loop, which owns the metrics)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise _Refused(
                "bad_request", _plain(400, "request body is JSON nested too deeply")
            ) from None
        raise _Refused(
            "bad_request", _plain(400, f"request body is not valid JSON: {exc}")
        ) from None
    try:
        outcome = admission.review(
            endpoint, doc, check_schema=settings.check_schema, level_of=settings.level_of
        )
    except admission.ReviewError as exc:
        raise _Refused("bad_request", _plain(400, str(exc))) from None
    if outcome.verdict == "error":
        log.error("policy evaluation failed: %s", outcome.review.get("response"))
    return _Answer(orjson.dumps(outcome.review), outcome.kind, outcome.operation, outcome.verdict)


def _plain(status: int, text: str, close: bool = False) -> web.Response:
    response = web.Response(status=status, text=text + "\n")
    if close:
        response.force_close()
    return response


async def _healthz(request: web.BaseRequest) -> web.StreamResponse:
    return web.Response(text="ok\n")


def _readyz_handler(readiness: Readiness, tls: ReloadingTLS | None) -> Handler:
    async def readyz(request: web.BaseRequest) -> web.StreamResponse:
        reasons = readiness.reasons
        if tls is not None and tls.not_after.timestamp() <= time.time():
            reasons["tls"] = f"serving certificate expired at {tls.not_after:%Y-%m-%dT%H:%M:%SZ}"
        if not reasons:
            return web.Response(text="ok\n")
        lines = [f"{part}: {reason}" for part, reason in sorted(reasons.items())]
        return web.Response(status=503, text="not ready\n" + "\n".join(lines) + "\n")

    return readyz


def _metrics_handler(metrics: Metrics) -> Handler:
    async def serve_metrics(request: web.BaseRequest) -> web.StreamResponse:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return serve_metrics
