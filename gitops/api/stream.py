"""`GET /api/v1/stream`: server-sent events, one per `Hub.Change` its user may see.

It starts with `retry: 2000`, then sends each change as `event: <kind>` / `data: {"type": …,
"object": …}` and a `: ping` comment after `heartbeat` seconds (15) without one. Only changes
of namespaces the user may list are sent (`gitops.api.access.may_see`). It ends when the client
goes away (noticed within a second), stops reading (a write blocked `write_timeout`, 30 s: its
connection is dropped) or the app shuts down (`end_streams`, on shutdown, ends every open
stream at once). Each stream counts against the caps (`open_stream`: 429 beyond).

A stream outlives no token: every `stream_recheck` seconds (30) its token is reviewed again
(a TokenReview, through the access cache of `gitops.api.reviews`: at most its `ttl` old;
`gitops.api.access.still_valid`, which the dashboard's log follows use too), and the stream
ends — with a `: ` comment saying why — once the API server no longer accepts it, names
another user, or cannot be asked. Whatever happens, it ends after `stream_lifetime`
seconds (an hour); the browser's EventSource reconnects, authenticated anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

import orjson
from aiohttp import web

from gitops.api.access import may_see, open_stream, still_valid
from gitops.api.show import shown_repository
from gitops.api.state import HUB, SETTINGS, STREAMS
from gitops.runtime.hub import Change

__all__ = ["end_streams", "stream"]

log = logging.getLogger("gitops.api.routes")

_POLL = 1.0
"""How often an idle stream checks that its client is still there (seconds)."""


async def stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
        }
    )
    async with open_stream(request):
        return await _serve_stream(request, response)


async def _serve_stream(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    streams = request.app[STREAMS]
    iterator = aiter(request.app[HUB].changes())
    pending: asyncio.Future[Any] | None = None
    closing: asyncio.Future[Any] = asyncio.ensure_future(streams.closing.wait())
    loop = asyncio.get_running_loop()
    try:
        await response.prepare(request)
        await response.write(f"retry: {settings.retry_ms}\n\n".encode())
        quiet_since = started = checked = loop.time()
        while not streams.closing.is_set() and not _gone(request):
            now = loop.time()
            if now - started >= settings.stream_lifetime:
                await _write(response, b": the stream's lifetime is over\n\n", 1.0)
                break
            if now - checked >= settings.stream_recheck:
                why = await still_valid(request)
                if why:
                    await _write(response, f": {why}\n\n".encode(), 1.0)
                    break
                checked = loop.time()
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            due = min(
                quiet_since + settings.heartbeat,
                checked + settings.stream_recheck,
                started + settings.stream_lifetime,
            )
            wait = max(0.0, min(_POLL, due - loop.time()))
            await asyncio.wait(
                {pending, closing}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
            if streams.closing.is_set() or _gone(request):
                break
            if pending.done():
                done, pending = pending, None
                try:
                    change = done.result()
                except StopAsyncIteration:
                    break
                if not await may_see(request, change):
                    continue
                await _write(response, _event(change), settings.write_timeout)
                quiet_since = loop.time()
            elif loop.time() - quiet_since >= settings.heartbeat:
                await _write(response, b": ping\n\n", settings.write_timeout)
                quiet_since = loop.time()
    except ConnectionError:  # the client went away mid-write
        pass
    except TimeoutError:  # the client stopped reading: drop it rather than wait forever
        log.info("an event stream reader stalled for %gs; closing it", settings.write_timeout)
        if request.transport is not None:
            request.transport.abort()
    except Exception:
        log.exception("the change stream failed")
    finally:
        closing.cancel()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                log.exception("closing a change subscription failed")
    return response


async def _write(response: web.StreamResponse, data: bytes, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        await response.write(data)


async def end_streams(app: web.Application) -> None:
    app[STREAMS].closing.set()


def _event(change: Change) -> bytes:
    obj = shown_repository(change.object) if change.kind == "repository" else change.object
    data = orjson.dumps({"type": change.type, "object": obj})
    kind = re.sub(r"[\r\n]", "", change.kind) or "message"
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()
