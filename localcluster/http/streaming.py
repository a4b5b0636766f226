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
from collections.abc import Sequence

import aiohttp
from aiohttp import WSMsgType, web

from localcluster.api.types import ApiError

__all__ = ["MAX_MESSAGE", "proxy_websocket", "upstream_error"]

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
    if not web.WebSocketResponse().can_prepare(request).ok:
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
