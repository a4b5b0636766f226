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

Bounds: client frames up to 1 MiB (`spdy.MAX_FRAME`), at most `MAX_BUFFERED` bytes read but not
yet consumed (reading pauses beyond), streams must all be open within `STREAMS_SECONDS`
(the kubelet's stream creation timeout, 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from aiohttp import WSMsgType, web

from localcluster.kubelet import remotecommand as rc
from localcluster.kubelet import spdy

__all__ = ["Channels", "SpdyChannels", "WebSocketChannels", "spdy_protocol"]

STREAMS_SECONDS = 30.0
CLOSE_SECONDS = 5.0  # how long the client gets to close the connection after the last FIN
MAX_BUFFERED = 4 * 1024 * 1024
WRITE_BUFFER = 1024 * 1024  # output waits while this much is unsent
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
    offered = {
        p.strip()
        for header in request.headers.getall("X-Stream-Protocol-Version", [])
        for p in header.split(",")
    }
    return next((p for p in SPDY_PROTOCOLS if p in offered), None)


class _Feed:
    """What aiohttp's connection hands an upgraded connection's bytes to (`set_parser`)."""

    def __init__(self, channels: SpdyChannels) -> None:
        self.channels = channels

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.channels._received(data)
        return False, b""

    def feed_eof(self) -> None:
        self.channels._received(b"")


class SpdyChannels:
    def __init__(self, request: web.Request, options: rc.ExecOptions) -> None:
        self.request = request
        self.transport = request.transport
        self.decoder = spdy.Decoder()
        self.encoder = spdy.Encoder()
        self.streams: dict[int, int] = {}  # channel → stream id
        self.finished: set[int] = set()  # channels this side has closed
        self.queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        self.buffered = 0
        self.paused = False
        self.resize_buffer = b""
        self.last_stream = 0
        self.ended = asyncio.Event()
        self.all_open = asyncio.Event()
        self.wanted = {rc.ERROR}
        self.wanted |= {rc.STDIN} if options.stdin else set()
        self.wanted |= {rc.STDOUT} if options.stdout else set()
        self.wanted |= {rc.STDERR} if options.stderr else set()
        self.wanted |= {rc.RESIZE} if options.tty else set()

    async def accept(self, protocol: str) -> tuple[web.StreamResponse, bool]:
        """Answer the upgrade (the response, sent) and wait for the client's streams (False:
        they did not all come in time; the connection is closed)."""
        response = web.StreamResponse(
            status=101,
            headers={
                "Connection": "Upgrade",
                "Upgrade": "SPDY/3.1",
                "X-Stream-Protocol-Version": protocol,
            },
        )
        response.force_close()  # the connection is SPDY's now; never another HTTP request
        # From here on the connection's bytes come to this object, not to the HTTP parser.
        self.request.protocol.set_parser(_Feed(self))  # type: ignore[arg-type]
        await response.prepare(self.request)
        try:
            async with asyncio.timeout(STREAMS_SECONDS):
                await self.all_open.wait()
        except TimeoutError:
            self._abort()
            return response, False
        return response, True

    # -- reading (called by aiohttp's protocol, synchronously) ---------------------------
    def _received(self, data: bytes) -> None:
        if not data:
            self._end()
            return
        try:
            frames = self.decoder.feed(data)
        except spdy.SpdyError:
            self._write(self.encoder.goaway(self.last_stream, spdy.PROTOCOL_ERROR))
            self._abort()
            return
        for frame in frames:
            self._frame(frame)

    def _frame(self, frame: spdy.Frame) -> None:
        if isinstance(frame, spdy.SynStream):
            self.last_stream = max(self.last_stream, frame.stream_id)
            kind = (frame.headers.get("streamtype") or [""])[0]
            channel = _STREAM_TYPES.get(kind)
            if channel is None or channel in self.streams:
                self._write(self.encoder.rst_stream(frame.stream_id, spdy.REFUSED_STREAM))
                return
            self.streams[channel] = frame.stream_id
            self._write(self.encoder.syn_reply(frame.stream_id, {}))
            if self.wanted <= self.streams.keys():
                self.all_open.set()
            if frame.fin:
                self._closed_by_client(channel)
        elif isinstance(frame, spdy.Data):
            channel = next((c for c, s in self.streams.items() if s == frame.stream_id), None)
            if channel == rc.RESIZE:
                self._resize(frame.data)
            elif channel == rc.STDIN and frame.data:
                self._put((rc.STDIN, frame.data))
            if frame.fin and channel is not None:
                self._closed_by_client(channel)
        elif isinstance(frame, spdy.RstStream):
            channel = next((c for c, s in self.streams.items() if s == frame.stream_id), None)
            if channel is not None:
                self._closed_by_client(channel)
        elif isinstance(frame, spdy.Ping):
            self._write(self.encoder.ping(frame.ping_id))
        elif isinstance(frame, spdy.GoAway):
            self._end()

    def _resize(self, data: bytes) -> None:
        self.resize_buffer += data
        *lines, self.resize_buffer = self.resize_buffer.split(b"\n")
        self.resize_buffer = self.resize_buffer[-4096:]  # one JSON object is small
        for line in lines:
            if line.strip():
                self._put((rc.RESIZE, line))

    def _closed_by_client(self, channel: int) -> None:
        if channel == rc.STDIN:
            self._put((rc.CHANNEL_CLOSE, bytes((rc.STDIN,))))

    def _put(self, item: tuple[int, bytes]) -> None:
        self.queue.put_nowait(item)
        self.buffered += len(item[1])
        if self.buffered > MAX_BUFFERED and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True

    def _end(self) -> None:
        if not self.ended.is_set():
            self.ended.set()
            self.queue.put_nowait(None)

    def _abort(self) -> None:
        self._end()
        if self.transport is not None:
            self.transport.close()

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    # -- Channels -------------------------------------------------------------------------
    async def send(self, channel: int, data: bytes) -> None:
        stream = self.streams.get(channel)
        if stream is None or channel in self.finished:
            return
        for start in range(0, len(data), spdy.MAX_FRAME):
            self._write(self.encoder.data(stream, data[start : start + spdy.MAX_FRAME]))
        if channel == rc.ERROR:  # one status per session: the stream ends with it
            self._finish(channel)
        # No flow control in SPDY as Kubernetes uses it: wait while the socket is behind.
        while (
            self.transport is not None
            and not self.transport.is_closing()
            and self.transport.get_write_buffer_size() > WRITE_BUFFER
        ):
            await asyncio.sleep(0.01)

    def _finish(self, channel: int) -> None:
        if channel in self.streams and channel not in self.finished:
            self.finished.add(channel)
            self._write(self.encoder.data(self.streams[channel], b"", fin=True))

    async def incoming(self) -> AsyncIterator[tuple[int, bytes]]:
        while (item := await self.queue.get()) is not None:
            self.buffered -= len(item[1])
            if self.paused and self.buffered < MAX_BUFFERED // 2 and self.transport is not None:
                self.transport.resume_reading()
                self.paused = False
            yield item

    async def close(self) -> None:
        for channel in (rc.STDOUT, rc.STDERR, rc.ERROR):
            self._finish(channel)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await self.ended.wait()  # the client closes once it has read everything
        self._abort()
