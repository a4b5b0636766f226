"""Proxying a WebSocket subresource (`pods/exec`) to the pod's kubelet.

kube-apiserver serves `pods/exec` by opening the same kind of connection to the kubelet's
`/exec/{namespace}/{pod}/{container}` (presenting its kubelet client certificate) and relaying
between the two. Here both legs are WebSockets: the client's upgrade is answered only once the
kubelet has accepted its own, with the subprotocol the kubelet chose among those the client
offered (`v5.channel.k8s.io`, `v4.channel.k8s.io`), and every message is relayed unchanged in
both directions until either side closes. When the kubelet refuses (pod or container not
there, not running, no WebSocket), its `Status` becomes the answer, so `kubectl exec` prints the
kubelet's reason; a request without a WebSocket upgrade (SPDY, kubectl < 1.30) gets the
kubelet's answer to a plain request, which says that SPDY is not served.

The relay adds no timeout of its own beyond connecting: the kubelet bounds a session (idle
timeout, the command's life) and closing either side closes the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Sequence

import aiohttp
from aiohttp import WSMsgType, web

from localcluster.api.types import ApiError

__all__ = [
    "MAX_MESSAGE",
    "proxy_spdy",
    "proxy_websocket",
    "tunneled_protocols",
    "upstream_error",
]

MAX_MESSAGE = 1024 * 1024
CONNECT_SECONDS = 10.0

Params = Sequence[tuple[str, str]]


def upstream_error(code: int, body: bytes) -> ApiError:
    """The kubelet's error answer as an ApiError (its Status when it sent one)."""
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("kind") == "Status":
            return ApiError(
                int(status.get("code") or code), status.get("reason", ""), status.get("message", "")
            )
    except ValueError:
        pass
    reason = "NotFound" if code == 404 else "BadRequest" if code == 400 else "InternalError"
    return ApiError(code, reason, body.decode("utf-8", "replace").strip())


async def proxy_websocket(
    request: web.Request,
    url: str,
    params: Params,
    *,
    tls: ssl.SSLContext | bool,
) -> web.StreamResponse:
    """Relay the client's WebSocket to the kubelet's at `url` (see the module docstring)."""
    # A session of its own: no total timeout may cut a long exec session.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return await _proxy(request, url, params, session, tls)


async def _proxy(
    request: web.Request,
    url: str,
    params: Params,
    session: aiohttp.ClientSession,
    tls: ssl.SSLContext | bool,
) -> web.StreamResponse:
    if not _is_websocket(request):
        raise await _kubelet_refusal(session, url, params, tls)
    offered = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    try:
        async with asyncio.timeout(CONNECT_SECONDS):
            upstream = await session.ws_connect(
                url,
                params=params,
                protocols=offered,
                ssl=tls,
                max_msg_size=MAX_MESSAGE,
                timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
                autoping=True,
            )
    except aiohttp.WSServerHandshakeError:
        raise await _kubelet_refusal(session, url, params, tls) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise ApiError(500, "InternalError", f"error dialing backend: {e}") from None
    try:
        protocols = (upstream.protocol,) if upstream.protocol else ()
        downstream = web.WebSocketResponse(protocols=protocols, max_msg_size=MAX_MESSAGE)
        await downstream.prepare(request)
        relays = [
            asyncio.create_task(_relay(downstream, upstream)),
            asyncio.create_task(_relay(upstream, downstream)),
        ]
        try:
            await asyncio.wait(relays, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in relays:
                task.cancel()
            await downstream.close()
        return downstream
    finally:
        await upstream.close()


def _is_websocket(request: web.Request) -> bool:
    """A WebSocket upgrade request (its protocols are checked where it is answered)."""
    connection = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    return request.headers.get("Upgrade", "").lower() == "websocket" and "upgrade" in connection


async def _relay(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    with contextlib.suppress(ConnectionError, aiohttp.ClientError):
        async for msg in source:
            if msg.type == WSMsgType.BINARY:
                await sink.send_bytes(msg.data)
            elif msg.type == WSMsgType.TEXT:
                await sink.send_str(msg.data)


async def _kubelet_refusal(
    session: aiohttp.ClientSession, url: str, params: Params, tls: ssl.SSLContext | bool
) -> ApiError:
    """Why the kubelet refuses: its answer to the same request without an upgrade."""
    try:
        async with session.get(
            url, params=params, ssl=tls, timeout=aiohttp.ClientTimeout(total=CONNECT_SECONDS)
        ) as resp:
            body = await resp.content.read(64 * 1024)
            if resp.status < 400:
                return ApiError(500, "InternalError", "the kubelet did not upgrade the connection")
            return upstream_error(resp.status, body)
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        return ApiError(500, "InternalError", f"error dialing backend: {e}")


# -- SPDY: passed through as bytes ---------------------------------------------------------

TUNNEL_PREFIX = "SPDY/3.1+"
MAX_HEAD = 64 * 1024
BEHIND = 4 * 1024 * 1024  # unsent bytes at which a pipe stops reading its source
CHUNK = 32 * 1024


def tunneled_protocols(request: web.Request) -> list[str]:
    """The SPDY stream protocols a WebSocket tunnel offers (`SPDY/3.1+portforward.k8s.io`)."""
    offered = request.headers.get("Sec-WebSocket-Protocol", "").split(",")
    return [
        p.strip()[len(TUNNEL_PREFIX) :]
        for p in offered
        if p.strip().startswith(TUNNEL_PREFIX) and p.strip().endswith(".k8s.io")
    ]


async def proxy_spdy(
    request: web.Request,
    address: tuple[str, int],
    target: str,
    *,
    tls: ssl.SSLContext | bool,
) -> web.StreamResponse:
    """Connect the client to the kubelet's SPDY upgrade at `target` (path and query).

    Two shapes of client, both passed through byte for byte once the kubelet has switched
    protocols: a WebSocket whose subprotocol `SPDY/3.1+<protocol>` says that its binary
    messages carry a SPDY connection (kubectl port-forward ≥ 1.31: kube-apiserver's
    "tunneling"), and a plain `Upgrade: SPDY/3.1` (kubectl exec < 1.30, port-forward with
    websockets off), whose connection is taken from aiohttp's HTTP parser.
    """
    tunneled = tunneled_protocols(request)
    if _is_websocket(request):
        if not tunneled:
            raise ApiError(
                400, "BadRequest", f"want a WebSocket subprotocol {TUNNEL_PREFIX}<protocol>"
            )
        reader, writer, chosen = await _upgrade(address, target, tunneled, tls)
        try:
            ws = web.WebSocketResponse(
                protocols=(TUNNEL_PREFIX + chosen,), max_msg_size=MAX_MESSAGE
            )
            await ws.prepare(request)
            await _first(_ws_to_stream(ws, writer), _stream_to_ws(reader, ws))
            await ws.close()
            return ws
        finally:
            writer.close()
    if not request.headers.get("Upgrade", "").lower().startswith("spdy/"):
        raise ApiError(400, "BadRequest", "this subresource needs a WebSocket or SPDY/3.1 upgrade")
    offered = [
        p.strip()
        for header in request.headers.getall("X-Stream-Protocol-Version", [])
        for p in header.split(",")
        if p.strip()
    ]
    reader, writer, chosen = await _upgrade(address, target, offered, tls)
    try:
        response = web.StreamResponse(
            status=101,
            headers={
                "Connection": "Upgrade",
                "Upgrade": "SPDY/3.1",
                "X-Stream-Protocol-Version": chosen,
            },
        )
        response.force_close()
        pipe = _ClientPipe(request, writer)
        # The client sends nothing until it has the 101: no byte reaches the HTTP parser.
        request.protocol.set_parser(pipe)  # type: ignore[arg-type]
        await response.prepare(request)
        await _first(pipe.ended.wait(), _stream_to_transport(reader, request))
        if request.transport is not None:
            request.transport.close()
        return response
    finally:
        writer.close()


class _ClientPipe:
    """The client's bytes, from aiohttp's connection, written to the kubelet."""

    def __init__(self, request: web.Request, writer: asyncio.StreamWriter) -> None:
        self.request = request
        self.writer = writer
        self.ended = asyncio.Event()
        self.draining: asyncio.Task[None] | None = None

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.writer.write(data)
        transport = self.writer.transport
        if transport.get_write_buffer_size() > BEHIND and self.draining is None:
            if self.request.transport is not None:
                self.request.transport.pause_reading()
            self.draining = asyncio.get_running_loop().create_task(self._drain())
        return False, b""

    async def _drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()
        if self.request.transport is not None and not self.request.transport.is_closing():
            self.request.transport.resume_reading()
        self.draining = None

    def feed_eof(self) -> None:
        self.ended.set()


async def _upgrade(
    address: tuple[str, int], target: str, protocols: Sequence[str], tls: ssl.SSLContext | bool
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """Ask the kubelet to switch to SPDY; (reader, writer, the protocol it chose), or the
    kubelet's refusal as an ApiError."""
    host, port = address
    context = tls if isinstance(tls, ssl.SSLContext) else _unverified()
    head = [
        f"POST {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Connection: Upgrade",
        "Upgrade: SPDY/3.1",
        *(f"X-Stream-Protocol-Version: {p}" for p in protocols),
        "Content-Length: 0",
        "",
        "",
    ]
    try:
        async with asyncio.timeout(CONNECT_SECONDS):
            reader, writer = await asyncio.open_connection(host, port, ssl=context, limit=MAX_HEAD)
            writer.write("\r\n".join(head).encode())
            raw = await reader.readuntil(b"\r\n\r\n")
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
        raise ApiError(500, "InternalError", f"error dialing backend: {e}") from None
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
    }
    if code == 101:
        return reader, writer, headers.get("x-stream-protocol-version", "")
    try:
        length = min(int(headers.get("content-length", "0") or 0), MAX_HEAD)
        async with asyncio.timeout(CONNECT_SECONDS):
            body = await reader.readexactly(length)
    except (ValueError, OSError, TimeoutError, asyncio.IncompleteReadError):
        body = b""
    finally:
        writer.close()
    raise upstream_error(code or 502, body)


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _first(*waits: Awaitable[object]) -> None:
    """Run until the first of `waits` ends; cancel the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _ws_to_stream(ws: web.WebSocketResponse, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                writer.write(msg.data)
                await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _stream_to_ws(reader: asyncio.StreamReader, ws: web.WebSocketResponse) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(CHUNK):
            await ws.send_bytes(data)


async def _stream_to_transport(reader: asyncio.StreamReader, request: web.Request) -> None:
    transport = request.transport
    with contextlib.suppress(ConnectionError):
        while transport is not None and (data := await reader.read(CHUNK)):
            if transport.is_closing():
                return
            transport.write(data)
            while transport.get_write_buffer_size() > BEHIND and not transport.is_closing():
                await asyncio.sleep(0.01)
