"""SPDY/3.1 framing, the server's half that an exec needs (pure: bytes in, frames out).

kube-apiserver (1.30+) accepts `kubectl exec` as a WebSocket but speaks SPDY/3.1 to the
kubelet (its "stream translator"), as kubectl < 1.30 does to the API server: a multiplexed
connection on which the client opens one stream per channel (`SYN_STREAM` with the header
`streamtype: error|stdin|stdout|stderr|resize`), the server accepts each (`SYN_REPLY`), and
data flows in `DATA` frames, FIN marking a stream's end. Header blocks are compressed with
one zlib stream per direction, primed with the dictionary the SPDY/3 specification defines
(section 2.6.10.1); the peers Kubernetes uses do no flow control, so `WINDOW_UPDATE` and
`SETTINGS` are read and ignored. `PING` must be answered (the API server pings every 5 s).

Frame layout (all big-endian): a control frame is `1 | version(15) | type(16)`, then
`flags(8) | length(24)`, then the payload; a data frame is `0 | stream id(31)`, then
`flags(8) | length(24)`, then the data.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = [
    "DICTIONARY",
    "Data",
    "Decoder",
    "Encoder",
    "GoAway",
    "Headers",
    "Ignored",
    "Ping",
    "RstStream",
    "SpdyError",
    "SynStream",
]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
FLAG_FIN = 0x01
MAX_FRAME = 1024 * 1024  # larger frames are refused (the format allows 16 MiB)
MAX_HEADERS = 64 * 1024  # a header block's uncompressed size

# RST_STREAM status codes used here.
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5

# The SPDY/3 header dictionary: these names and values, each preceded by its length as four
# bytes, then a run of common values (status lines, dates, media types).
_WORDS = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()
DICTIONARY_ADLER32 = 0xE3C6A7C2  # zlib's id of this dictionary (the header's DICTID)


class SpdyError(Exception):
    """The peer broke the protocol; the connection cannot continue."""


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    fin: bool
    headers: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Data:
    stream_id: int
    fin: bool
    data: bytes


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_stream_id: int
    status: int


@dataclass(frozen=True)
class Headers:
    stream_id: int
    fin: bool


@dataclass(frozen=True)
class Ignored:
    frame_type: int


Frame = SynStream | Data | RstStream | Ping | GoAway | Headers | Ignored


class Decoder:
    """Frames from the bytes a client sends, fed in pieces as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer)
            flags, length = second >> 24, second & 0xFFFFFF
            if length > MAX_FRAME:
                raise SpdyError(f"frame of {length} bytes (at most {MAX_FRAME})")
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            if first & 0x80000000:
                frames.append(self._control(first, flags, payload))
            else:
                frames.append(Data(first & 0x7FFFFFFF, bool(flags & FLAG_FIN), payload))
        return frames

    def _control(self, first: int, flags: int, payload: bytes) -> Frame:
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyError(f"SPDY version {version} (want {VERSION})")
        fin = bool(flags & FLAG_FIN)
        try:
            if kind == SYN_STREAM:
                (stream_id,) = struct.unpack_from(">I", payload)
                return SynStream(stream_id & 0x7FFFFFFF, fin, self._headers(payload[10:]))
            if kind == HEADERS:  # read to keep the compression state; nothing else to do
                (stream_id,) = struct.unpack_from(">I", payload)
                self._headers(payload[4:])
                return Headers(stream_id & 0x7FFFFFFF, fin)
            if kind == RST_STREAM:
                stream_id, status = struct.unpack_from(">II", payload)
                return RstStream(stream_id & 0x7FFFFFFF, status)
            if kind == PING:
                return Ping(struct.unpack_from(">I", payload)[0])
            if kind == GOAWAY:
                last, status = struct.unpack_from(">II", payload)
                return GoAway(last & 0x7FFFFFFF, status)
        except struct.error as e:
            raise SpdyError(f"short control frame of type {kind}") from e
        return Ignored(kind)

    def _headers(self, compressed: bytes) -> dict[str, list[str]]:
        try:
            block = self._inflate.decompress(compressed, MAX_HEADERS)
        except zlib.error as e:
            raise SpdyError(f"header block: {e}") from e
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"header block larger than {MAX_HEADERS} bytes")
        return _parse_header_block(block)


class Encoder:
    """The server's frames; one instance per connection (it holds the compression state)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def syn_reply(self, stream_id: int, headers: dict[str, str], *, fin: bool = False) -> bytes:
        block = struct.pack(">I", len(headers))
        for name, value in headers.items():
            block += _string(name.lower()) + _string(value)
        compressed = self._deflate.compress(block) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return _control(
            SYN_REPLY, FLAG_FIN if fin else 0, struct.pack(">I", stream_id) + compressed
        )

    def data(self, stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
        if len(data) > MAX_FRAME:
            raise ValueError(f"data frame of {len(data)} bytes (at most {MAX_FRAME})")
        flags = FLAG_FIN if fin else 0
        return struct.pack(">II", stream_id & 0x7FFFFFFF, flags << 24 | len(data)) + data

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return _control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return _control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(payload)) + payload


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">I", len(raw)) + raw


def _parse_header_block(block: bytes) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    try:
        (count,) = struct.unpack_from(">I", block)
        offset = 4
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
            (n,) = struct.unpack_from(">I", block, offset)
            value = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
            headers.setdefault(name.lower(), []).extend(value.split("\0"))
    except (struct.error, UnicodeDecodeError) as e:
        raise SpdyError("malformed header block") from e
    if offset != len(block):
        raise SpdyError("malformed header block: trailing bytes")
    return headers
