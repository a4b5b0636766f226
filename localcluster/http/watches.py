"""WATCH: a chunked stream of `{"type": ..., "object": ...}` JSON lines.

Start points as in kube-apiserver: no resourceVersion (or "0") sends the current objects as
ADDED first; a resourceVersion N replays retained events after N (or one ERROR event with a
410 Expired Status when N was compacted away); `sendInitialEvents=true` sends the current state
and then a BOOKMARK annotated `k8s.io/initial-events-end`. With `allowWatchBookmarks`, idle
streams get periodic BOOKMARKs carrying the latest resourceVersion. `timeoutSeconds` ends the
stream cleanly.

A watcher that falls behind (its queue passes the hub's bound, `store/watch.py`) gets an ERROR
event with a 410 Expired Status and the stream ends, so its client re-lists. A watcher that does
not read at all keeps the handler waiting on the socket: its connection is aborted instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from localcluster.api.registry import resource_id
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.http import tables
from localcluster.http.httputil import Accept, flag
from localcluster.store.listing import parse_resource_version
from localcluster.store.records import Event, dumps
from localcluster.store.selectors import Selector
from localcluster.store.storage import TooOld
from localcluster.store.watch import Subscription, WatchFilter
from localcluster.write.state import Server

__all__ = ["serve_watch"]

_DEFAULT_TIMEOUT = 1800.0
_FLUSH_BYTES = 256 * 1024
_LAST_WRITE_SECONDS = 5.0


def _encoder(
    info: ResourceInfo, accept: Accept, include: str
) -> Callable[[str, dict[str, Any], bytes | None], bytes]:
    def encode(typ: str, obj: dict[str, Any], raw: bytes | None) -> bytes:
        if accept.as_kind == "Table" and typ != "BOOKMARK":
            body = dumps(tables.to_table(info, [obj], include_object=include))
        elif accept.as_kind.startswith("PartialObjectMetadata") and typ != "BOOKMARK":
            body = dumps(
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata", {}),
                }
            )
        elif raw is not None and obj.get("apiVersion") == info.api_version:
            body = raw
        else:
            body = dumps({**obj, "apiVersion": info.api_version} if typ != "BOOKMARK" else obj)
        return b'{"type":"' + typ.encode() + b'","object":' + body + b"}\n"

    return encode


class _Sender:
    """Writes to the stream; aborts the connection if the subscriber is cut off mid-write."""

    def __init__(self, request: web.Request, response: web.StreamResponse) -> None:
        self.request = request
        self.response = response
        self.writing = False

    async def write(self, data: bytes) -> None:
        self.writing = True
        try:
            await self.response.write(data)
        finally:
            self.writing = False

    async def write_last(self, data: bytes) -> None:
        """The last words to a subscriber that was cut off: if it does not take them, abort."""
        try:
            async with asyncio.timeout(_LAST_WRITE_SECONDS):
                await self.write(data)
        except TimeoutError:
            self.abort()

    def cut_off(self) -> None:
        if self.writing:
            self.abort()

    def abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.abort()


def _fell_behind(info: ResourceInfo, sub: Subscription) -> bytes:
    status = ApiError(
        410,
        "Expired",
        f"watch of {info.plural} fell behind: more than {sub.max_backlog} events or "
        f"{sub.max_bytes} bytes waiting; re-list",
    ).status()
    return b'{"type":"ERROR","object":' + dumps(status) + b"}\n"


def _bookmark(info: ResourceInfo, rv: int, *, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}


async def serve_watch(
    request: web.Request,
    srv: Server,
    info: ResourceInfo,
    namespace: str | None,
    selector: Selector,
    accept: Accept,
) -> web.StreamResponse:
    query = request.query
    rv_param = query.get("resourceVersion", "")
    send_initial = query.get("sendInitialEvents", "")
    bookmarks = flag(query, "allowWatchBookmarks")
    include = query.get("includeObject", "Metadata")
    try:
        timeout = float(query.get("timeoutSeconds") or _DEFAULT_TIMEOUT)
    except ValueError:
        raise ApiError(400, "BadRequest", "timeoutSeconds: must be an integer") from None
    rid = resource_id(info)
    store = srv.store
    initial_mode = send_initial == "true" or (rv_param in ("", "0") and send_initial != "false")
    since = 0 if initial_mode else parse_resource_version(rv_param or "0")
    # No await between reading the state and subscribing: nothing can slip in between.
    initial = []
    if initial_mode:
        initial = [
            r for r in store.records(rid, namespace) if selector.empty or selector.matches(r.obj)
        ]
    sub = srv.hub.subscribe(WatchFilter(rid, namespace, selector))
    too_old: TooOld | None = None
    if not initial_mode:
        try:
            sub.backlog(store.events_after(since))
        except TooOld as e:
            too_old = e
    start_rv = store.resource_version
    encode = _encoder(info, accept, include)
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"},
    )
    response.enable_chunked_encoding()
    sender = _Sender(request, response)
    sub.on_overflow = sender.cut_off
    deadline = time.monotonic() + timeout
    try:
        await response.prepare(request)
        if too_old is not None:
            status = ApiError(
                410, "Expired", f"too old resource version: {too_old.requested} ({too_old.oldest})"
            ).status()
            await sender.write(b'{"type":"ERROR","object":' + dumps(status) + b"}\n")
            return response
        buf = bytearray()
        for rec in initial:
            buf += encode("ADDED", rec.obj, rec.raw)
            if len(buf) > _FLUSH_BYTES:
                await sender.write(bytes(buf))
                buf.clear()
        if send_initial == "true" and bookmarks:
            buf += encode("BOOKMARK", _bookmark(info, start_rv, initial_end=True), None)
        if buf:
            await sender.write(bytes(buf))
        last_bookmark = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, last_bookmark + srv.bookmark_interval - now))
            try:
                if sub.empty():
                    async with asyncio.timeout(wait):
                        item = await sub.get()
                else:
                    item = sub.get_nowait()
            except TimeoutError:
                if bookmarks and sub.empty() and time.monotonic() < deadline:
                    await sender.write(
                        encode("BOOKMARK", _bookmark(info, store.resource_version), None)
                    )
                    last_bookmark = time.monotonic()
                continue
            items = [item, *sub.drain()]
            out = bytearray()
            closed = False
            for entry in items:
                if entry is None:
                    closed = True
                    if sub.overflowed:
                        out += _fell_behind(info, sub)
                    break
                typ, event = entry
                out += _event_line(encode, typ, event)
            if out and closed:
                await sender.write_last(bytes(out))
            elif out:
                await sender.write(bytes(out))
            if closed:
                break
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        pass  # the client went away: nothing left to tell it
    finally:
        sub.close()
    return response


def _event_line(
    encode: Callable[[str, dict[str, Any], bytes | None], bytes], typ: str, event: Event
) -> bytes:
    return encode(typ, event.obj, event.raw)
