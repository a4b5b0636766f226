"""One SPDY/3.1 connection on an aiohttp request that asked to upgrade to it (shell).

A kubelet answers `Upgrade: SPDY/3.1` with `101 Switching Protocols` and from then on the TCP
(TLS) connection carries SPDY frames (`spdy.py`). aiohttp only hands over connections it knows
how to upgrade (WebSocket), so `accept` takes the connection from aiohttp's HTTP parser: before
the `101` goes out (the client sends nothing until it has read it), the connection's incoming
bytes are redirected to this object, which decodes frames and passes each to `on_frame`
(a subclass's; called synchronously, in order). `PING`s are answered here; `GOAWAY` or the end
of the connection sets `ended`.

Bounds: frames up to `spdy.MAX_FRAME`; at most `MAX_BUFFERED` bytes received but not yet
consumed (subclasses call `consumed`): reading pauses beyond; writers wait while more than
`WRITE_BUFFER` bytes are unsent (SPDY as Kubernetes uses it has no flow control).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from localcluster.kubelet import spdy

__all__ = ["MAX_BUFFERED", "SpdyConnection", "offered_protocols"]

MAX_BUFFERED = 4 * 1024 * 1024
WRITE_BUFFER = 1024 * 1024


def offered_protocols(request: web.Request) -> set[str]:
    """The stream protocols the client offers (`X-Stream-Protocol-Version`, repeatable)."""
    return {
        p.strip()
        for header in request.headers.getall("X-Stream-Protocol-Version", [])
        for p in header.split(",")
        if p.strip()
    }


class _Feed:
    """What aiohttp's connection hands an upgraded connection's bytes to (`set_parser`)."""

    def __init__(self, connection: SpdyConnection) -> None:
        self.connection = connection

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.connection._received(data)
        return False, b""

    def feed_eof(self) -> None:
        self.connection._received(b"")


class SpdyConnection:
    """The server side of one SPDY connection; subclasses implement `on_frame`."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.transport = request.transport
        self.decoder = spdy.Decoder()
        self.encoder = spdy.Encoder()
        self.ended = asyncio.Event()
        self.last_stream = 0
        self._buffered = 0
        self._paused = False

    async def accept(self, protocol: str) -> web.StreamResponse:
        """Answer the upgrade with `protocol`; frames arrive from now on."""
        response = web.StreamResponse(
            status=101,
            headers={
                "Connection": "Upgrade",
                "Upgrade": "SPDY/3.1",
                "X-Stream-Protocol-Version": protocol,
            },
        )
        response.force_close()  # the connection is SPDY's now; never another HTTP request
        self.request.protocol.set_parser(_Feed(self))  # type: ignore[arg-type]
        await response.prepare(self.request)
        return response

    def on_frame(self, frame: spdy.Frame) -> None:
        raise NotImplementedError

    def on_end(self) -> None:
        """The connection ended (closed, GOAWAY, or a protocol error)."""

    # -- reading (called by aiohttp's protocol, synchronously) ---------------------------
    def _received(self, data: bytes) -> None:
        if not data:
            self._end()
            return
        try:
            frames = self.decoder.feed(data)
        except spdy.SpdyError:
            self.write(self.encoder.goaway(self.last_stream, spdy.PROTOCOL_ERROR))
            self.abort()
            return
        for frame in frames:
            if isinstance(frame, spdy.SynStream):
                self.last_stream = max(self.last_stream, frame.stream_id)
            if isinstance(frame, spdy.Ping):
                self.write(self.encoder.ping(frame.ping_id))
            elif isinstance(frame, spdy.GoAway):
                self._end()
            else:
                self.on_frame(frame)

    def received(self, n: int) -> None:
        """`n` more bytes are held for a consumer: pause reading past the bound."""
        self._buffered += n
        if self._buffered > MAX_BUFFERED and not self._paused and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True

    def consumed(self, n: int) -> None:
        self._buffered -= n
        if self._paused and self._buffered < MAX_BUFFERED // 2 and self.transport is not None:
            self.transport.resume_reading()
            self._paused = False

    def _end(self) -> None:
        if not self.ended.is_set():
            self.ended.set()
            self.on_end()

    # -- writing ---------------------------------------------------------------------------
    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def send_data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        """Data on a stream (split into frames), then wait while the socket is behind."""
        for start in range(0, len(data), spdy.MAX_FRAME):
            last = start + spdy.MAX_FRAME >= len(data)
            chunk = data[start : start + spdy.MAX_FRAME]
            self.write(self.encoder.data(stream_id, chunk, fin=fin and last))
        if not data and fin:
            self.write(self.encoder.data(stream_id, b"", fin=True))
        while self.open and self.transport.get_write_buffer_size() > WRITE_BUFFER:  # type: ignore[union-attr]
            await asyncio.sleep(0.01)

    def abort(self) -> None:
        self._end()
        if self.transport is not None:
            self.transport.close()
