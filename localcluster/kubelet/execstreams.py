"""The two transports of an exec session, behind one small interface (shell).

An exec session (`execserver.py`) only sends `(channel, bytes)` and receives the client's
`(channel, bytes)` messages (channels of `remotecommand.py`). Two transports carry them:

- `WebSocketChannels`: what kubectl ≥ 1.30 speaks (through the embedded API server's relay):
  one binary message per piece, the channel in its first byte.
- `SpdyChannels`: what kube-apiserver speaks to a kubelet (and kubectl < 1.30): after an HTTP
  `101` to `Upgrade: SPDY/3.1`, the client opens one SPDY stream per channel, named by its
  `streamtype` header; the session starts once every stream the options call for is open.
  Stdin's FIN is the v5 "stdin closed" message; resize streams carry JSON lines. The server
  ends by closing its streams (FIN); the client then closes the connection.

Bounds: those of `spdyconn.py` (frame size, bytes held, unsent output), and the streams must
all be open within `STREAMS_SECONDS` (the kubelet's stream creation timeout, 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from aiohttp import WSMsgType, web

from localcluster.kubelet import remotecommand as rc
from localcluster.kubelet import spdy, spdyconn

__all__ = ["Channels", "SpdyChannels", "WebSocketChannels", "spdy_protocol"]

STREAMS_SECONDS = 30.0
CLOSE_SECONDS = 5.0  # how long the client gets to close the connection after the last FIN
SPDY_PROTOCOLS = ("v4.channel.k8s.io", "v5.channel.k8s.io")  # preferred first over SPDY

_STREAM_TYPES = {
    "stdin": rc.STDIN,
    "stdout": rc.STDOUT,
    "stderr": rc.STDERR,
    "error": rc.ERROR,
    "resize": rc.RESIZE,
}


class Channels(Protocol):
    async def send(self, channel: int, data: bytes) -> None: ...

    def incoming(self) -> AsyncIterator[tuple[int, bytes]]: ...

    async def close(self) -> None: ...


class WebSocketChannels:
    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def send(self, channel: int, data: bytes) -> None:
        if not self.ws.closed:
            await self.ws.send_bytes(rc.frame(channel, data))

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        async for msg in self.ws:
            if msg.type != WSMsgType.BINARY:
                continue  # text (the base64 protocols) is not served; aiohttp answers pings
            parsed = rc.parse_frame(msg.data)
            if parsed is not None:
                yield parsed

    async def close(self) -> None:
        await self.ws.close()


def spdy_protocol(request: web.Request) -> str | None:
    """The stream protocol to answer a SPDY upgrade with; None when none is acceptable."""
    offered = spdyconn.offered_protocols(request)
    return next((p for p in SPDY_PROTOCOLS if p in offered), None)


class SpdyChannels(spdyconn.SpdyConnection):
    def __init__(self, request: web.Request, options: rc.ExecOptions) -> None:
        super().__init__(request)
        self.streams: dict[int, int] = {}  # channel → stream id
        self.finished: set[int] = set()  # channels this side has closed
        self.queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        self.resize_buffer = b""
        self.all_open = asyncio.Event()
        self.wanted = {rc.ERROR}
        self.wanted |= {rc.STDIN} if options.stdin else set()
        self.wanted |= {rc.STDOUT} if options.stdout else set()
        self.wanted |= {rc.STDERR} if options.stderr else set()
        self.wanted |= {rc.RESIZE} if options.tty else set()

    async def start(self, protocol: str) -> tuple[web.StreamResponse, bool]:
        """Answer the upgrade (the response, sent) and wait for the client's streams (False:
        they did not all come in time; the connection is closed)."""
        response = await self.accept(protocol)
        try:
            async with asyncio.timeout(STREAMS_SECONDS):
                await self.all_open.wait()
        except TimeoutError:
            self.abort()
            return response, False
        return response, True

    def on_frame(self, frame: spdy.Frame) -> None:
        if isinstance(frame, spdy.SynStream):
            kind = (frame.headers.get("streamtype") or [""])[0]
            channel = _STREAM_TYPES.get(kind)
            if channel is None or channel in self.streams:
                self.write(self.encoder.rst_stream(frame.stream_id, spdy.REFUSED_STREAM))
                return
            self.streams[channel] = frame.stream_id
            self.write(self.encoder.syn_reply(frame.stream_id, {}))
            if self.wanted <= self.streams.keys():
                self.all_open.set()
            if frame.fin:
                self._closed_by_client(channel)
        elif isinstance(frame, spdy.Data):
            channel = self._channel(frame.stream_id)
            if channel == rc.RESIZE:
                self._resize(frame.data)
            elif channel == rc.STDIN and frame.data:
                self._put((rc.STDIN, frame.data))
            if frame.fin and channel is not None:
                self._closed_by_client(channel)
        elif isinstance(frame, spdy.RstStream):
            channel = self._channel(frame.stream_id)
            if channel is not None:
                self._closed_by_client(channel)

    def on_end(self) -> None:
        self.queue.put_nowait(None)

    def _channel(self, stream_id: int) -> int | None:
        return next((c for c, s in self.streams.items() if s == stream_id), None)

    def _resize(self, data: bytes) -> None:
        self.resize_buffer += data
        *lines, rest = self.resize_buffer.split(b"\n")
        self.resize_buffer = rest[-4096:]  # one JSON object is small
        for line in lines:
            if line.strip():
                self._put((rc.RESIZE, line))

    def _closed_by_client(self, channel: int) -> None:
        if channel == rc.STDIN:
            self._put((rc.CHANNEL_CLOSE, bytes((rc.STDIN,))))

    def _put(self, item: tuple[int, bytes]) -> None:
        self.queue.put_nowait(item)
        self.received(len(item[1]))

    # -- Channels -------------------------------------------------------------------------
    async def send(self, channel: int, data: bytes) -> None:
        stream = self.streams.get(channel)
        if stream is None or channel in self.finished:
            return
        if channel == rc.ERROR:  # one status per session: the stream ends with it
            self.finished.add(channel)
        await self.send_data(stream, data, fin=channel == rc.ERROR)

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        while (item := await self.queue.get()) is not None:
            self.consumed(len(item[1]))
            yield item

    async def close(self) -> None:
        for channel in (rc.STDOUT, rc.STDERR, rc.ERROR):
            if channel in self.streams and channel not in self.finished:
                self.finished.add(channel)
                self.write(self.encoder.data(self.streams[channel], b"", fin=True))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await self.ended.wait()  # the client closes once it has read everything
        self.abort()
