"""The kubelet's `/portForward/{namespace}/{pod}`: `kubectl port-forward` (shell).

What kube-apiserver sends a kubelet for `pods/portforward` is a SPDY/3.1 upgrade with the
stream protocol `portforward.k8s.io` (kubectl ≥ 1.31 tunnels that SPDY through a WebSocket to
the API server, which unwraps it). For every local connection kubectl accepts, it opens two
streams with the headers `streamtype` (`error`, `data`), `port` and `requestid`; once both are
open the kubelet connects to `localhost:<port>` **inside the pod's network namespace** (as
the container runtime does, so a server bound to 127.0.0.1 in the pod is reachable), copies
bytes both ways on the data stream, and writes a failure as text on the error stream (kubectl
prints `an error occurred forwarding …`). A pod on the host's network is reached on the host's
127.0.0.1.

Entering the namespace: a throwaway thread `setns`es into the pod's network namespace, makes
the connection there (a socket keeps the namespace it was made in) and ends; the kubelet's
other threads never change namespace.

Bounds: at most `MAX_PAIRS` forwarded connections at once per session (more are refused),
both streams of a pair within `STREAMS_SECONDS`, the connection made within `CONNECT_SECONDS`,
the session closed after `idle_timeout` seconds without traffic, plus those of `spdyconn.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from localcluster.kubelet import remotecommand as rc
from localcluster.kubelet import spdy, spdyconn
from localcluster.kubelet.runtime import Runtime

__all__ = ["PROTOCOL", "PortForwardServer"]

PROTOCOL = "portforward.k8s.io"
MAX_PAIRS = 128
STREAMS_SECONDS = 30.0
CONNECT_SECONDS = 5.0
IDLE_TIMEOUT = 4 * 3600.0
CHUNK = 32 * 1024
_CLONE_NEWNET = 0x40000000


def _response(code: int, reason: str, message: str) -> web.Response:
    body = rc.failure(message, reason=reason, code=code)
    return web.Response(status=code, text=json.dumps(body), content_type="application/json")


class PortForwardServer:
    def __init__(
        self,
        runtime: Runtime,
        lookup: Callable[[str, str], str | None],
        *,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.runtime = runtime
        self.lookup = lookup
        self.idle_timeout = idle_timeout

    def add_routes(self, app: web.Application) -> None:
        path = "/portForward/{namespace}/{pod}"
        app.router.add_get(path, self._port_forward)
        app.router.add_post(path, self._port_forward)

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        ns, pod = request.match_info["namespace"], request.match_info["pod"]
        uid = self.lookup(ns, pod)
        if uid is None:
            return _response(404, "NotFound", f'pods "{pod}" not found')
        if not await asyncio.to_thread(self.runtime.running_instances, uid):
            return _response(400, "BadRequest", f'pod "{pod}" has no running container')
        if not request.headers.get("Upgrade", "").lower().startswith("spdy/"):
            return _response(
                400, "BadRequest", f"port-forward needs a SPDY/3.1 upgrade ({PROTOCOL})"
            )
        if PROTOCOL not in spdyconn.offered_protocols(request):
            return _response(400, "BadRequest", f"unsupported stream protocol: want {PROTOCOL}")
        sandbox = await asyncio.to_thread(_read_sandbox, self.runtime.pod_dir(uid) / "sandbox.json")
        session = _Session(request, pod, uid, sandbox.get("netns"), self.idle_timeout)
        response = await session.accept(PROTOCOL)
        await session.run()
        return response


@dataclass
class _Pair:
    request_id: str
    port: int
    streams: dict[str, int] = field(default_factory=dict)  # streamtype → stream id
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    started: float = field(default_factory=time.monotonic)


class _Session(spdyconn.SpdyConnection):
    def __init__(
        self, request: web.Request, pod: str, uid: str, netns: str | None, idle_timeout: float
    ) -> None:
        super().__init__(request)
        self.pod, self.uid, self.netns = pod, uid, netns
        self.idle_timeout = idle_timeout
        self.pairs: dict[str, _Pair] = {}
        self.by_stream: dict[int, _Pair] = {}
        self.last_traffic = time.monotonic()

    async def run(self) -> None:
        try:
            while not self.ended.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await self.ended.wait()
                now = time.monotonic()
                if now - self.last_traffic > self.idle_timeout:
                    break
                for pair in list(self.pairs.values()):
                    if pair.task is None and now - pair.started > STREAMS_SECONDS:
                        self._drop(pair)
        finally:
            for pair in list(self.pairs.values()):
                self._drop(pair)
            self.abort()

    def on_frame(self, frame: spdy.Frame) -> None:
        self.last_traffic = time.monotonic()
        if isinstance(frame, spdy.SynStream):
            self._stream(frame)
        elif isinstance(frame, spdy.Data):
            pair = self.by_stream.get(frame.stream_id)
            if pair is None or pair.streams.get("data") != frame.stream_id:
                return  # data on an error stream, or an unknown stream: nothing to do
            if frame.data:
                pair.queue.put_nowait(frame.data)
                self.received(len(frame.data))
            if frame.fin:
                pair.queue.put_nowait(None)
        elif isinstance(frame, spdy.RstStream):
            pair = self.by_stream.get(frame.stream_id)
            if pair is not None:
                self._drop(pair)

    def on_end(self) -> None:
        for pair in list(self.pairs.values()):
            if pair.task is not None:
                pair.task.cancel()

    def _stream(self, frame: spdy.SynStream) -> None:
        headers = {k: v[0] for k, v in frame.headers.items() if v}
        kind, port_text = headers.get("streamtype", ""), headers.get("port", "")
        request_id = headers.get("requestid") or str(
            frame.stream_id if kind == "error" else frame.stream_id - 2
        )
        pair = self.pairs.get(request_id)
        valid = kind in ("error", "data") and port_text.isdigit() and 0 < int(port_text) < 65536
        if (
            not valid
            or (pair is None and len(self.pairs) >= MAX_PAIRS)
            or (pair is not None and (kind in pair.streams or pair.port != int(port_text)))
        ):
            self.write(self.encoder.rst_stream(frame.stream_id, spdy.REFUSED_STREAM))
            return
        if pair is None:
            pair = self.pairs[request_id] = _Pair(request_id, int(port_text))
        pair.streams[kind] = frame.stream_id
        self.by_stream[frame.stream_id] = pair
        self.write(self.encoder.syn_reply(frame.stream_id, {}))
        if len(pair.streams) == 2:
            pair.task = asyncio.create_task(self._forward(pair))

    def _drop(self, pair: _Pair) -> None:
        if self.pairs.get(pair.request_id) is not pair:
            return
        del self.pairs[pair.request_id]
        for stream_id in pair.streams.values():
            self.by_stream.pop(stream_id, None)
        if pair.task is not None and pair.task is not asyncio.current_task():
            pair.task.cancel()
        while not pair.queue.empty():
            item = pair.queue.get_nowait()
            self.consumed(len(item or b""))

    async def _forward(self, pair: _Pair) -> None:
        data_id, error_id = pair.streams["data"], pair.streams["error"]
        try:
            sock = await _connect(self.netns, pair.port)
        except OSError as e:
            message = (
                f"error forwarding port {pair.port} to pod {self.pod}, uid {self.uid}: "
                f"failed to connect to localhost:{pair.port} inside the pod's network: "
                f"{e.strerror or e}"
            )
            await self.send_data(error_id, message.encode(), fin=True)
            self.write(self.encoder.rst_stream(data_id, spdy.CANCEL))
            self._drop(pair)
            return
        reader, writer = await asyncio.open_connection(sock=sock)
        upward = asyncio.create_task(self._to_pod(pair, writer))
        try:
            while data := await reader.read(CHUNK):
                self.last_traffic = time.monotonic()
                await self.send_data(data_id, data)
            await self.send_data(data_id, b"", fin=True)
            await self.send_data(error_id, b"", fin=True)
        except (ConnectionError, OSError):
            self.write(self.encoder.rst_stream(data_id, spdy.CANCEL))
        finally:
            upward.cancel()
            writer.close()
            self._drop(pair)

    async def _to_pod(self, pair: _Pair, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while (data := await pair.queue.get()) is not None:
                self.consumed(len(data))
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()  # the client closed its side: so does the pod's connection


def _read_sandbox(path: os.PathLike[str]) -> dict[str, str]:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


async def _connect(netns: str | None, port: int) -> socket.socket:
    """A TCP connection to localhost:`port` in the network namespace `netns` (None: here)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[socket.socket] = loop.create_future()

    def work() -> None:
        try:
            sock = _connect_in(netns, port)
        except OSError as e:
            loop.call_soon_threadsafe(_settle, done, None, e)
        else:
            loop.call_soon_threadsafe(_settle, done, sock, None)

    threading.Thread(target=work, name=f"portforward-{port}", daemon=True).start()
    sock = await done
    sock.settimeout(None)
    return sock


def _settle(
    future: asyncio.Future[socket.socket], sock: socket.socket | None, error: OSError | None
) -> None:
    if future.cancelled():
        if sock is not None:
            sock.close()
    elif error is not None:
        future.set_exception(error)
    elif sock is not None:
        future.set_result(sock)


def _connect_in(netns: str | None, port: int) -> socket.socket:
    """Runs in a throwaway thread: it may be left in the pod's namespace."""
    if netns:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(netns, os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"join network namespace {netns}: {os.strerror(err)}")
        finally:
            os.close(fd)
    errors = []
    for host in ("127.0.0.1", "::1"):  # as the runtimes do: IPv4, then IPv6
        try:
            return socket.create_connection((host, port), timeout=CONNECT_SECONDS)
        except OSError as e:
            errors.append(f"{host}: {e.strerror or e}")
    raise OSError(0, "; ".join(errors))
