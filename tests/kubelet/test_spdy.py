"""The SPDY/3.1 frame codec (pure): a client's frames in, the server's frames out."""

from __future__ import annotations

import struct
import zlib

import pytest

from localcluster.kubelet import spdy


class Client:
    """The client's half of the framing, written from the SPDY/3 layout for these tests."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=spdy.DICTIONARY)

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        block = struct.pack(">I", len(headers))
        for k, v in headers.items():
            block += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        packed = self.deflate.compress(block) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIBB", stream_id, 0, 0, 0) + packed
        return struct.pack(">HHI", 0x8003, 1, (1 if fin else 0) << 24 | len(payload)) + payload

    def data(self, stream_id: int, data: bytes, fin: bool = False) -> bytes:
        return struct.pack(">II", stream_id, (1 if fin else 0) << 24 | len(data)) + data

    def ping(self, ping_id: int) -> bytes:
        return struct.pack(">HHII", 0x8003, 6, 4, ping_id)

    def reply_headers(self, frame: bytes) -> tuple[int, int, dict[str, str]]:
        """(type, stream id, headers) of a SYN_REPLY the server wrote."""
        _, kind = struct.unpack_from(">HH", frame)
        (stream_id,) = struct.unpack_from(">I", frame, 8)
        length = struct.unpack_from(">I", frame, 4)[0] & 0xFFFFFF
        block = self.inflate.decompress(frame[12 : 8 + length])
        (count,) = struct.unpack_from(">I", block)
        headers, offset = {}, 4
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
            (n,) = struct.unpack_from(">I", block, offset)
            headers[name] = block[offset + 4 : offset + 4 + n].decode()
            offset += 4 + n
        return kind, stream_id, headers


def test_the_dictionary_is_the_one_spdy3_defines() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == spdy.DICTIONARY_ADLER32


def test_streams_with_compressed_headers_are_read_across_frames_and_pieces() -> None:
    client, decoder = Client(), spdy.Decoder()
    wire = (
        client.syn_stream(1, {"streamtype": "error"})
        + client.syn_stream(3, {"streamtype": "stdin"})
        + client.data(3, b"hello")
        + client.data(3, b"", fin=True)
        + client.ping(7)
    )
    frames = []
    for i in range(0, len(wire), 5):  # the bytes arrive in small pieces
        frames += decoder.feed(wire[i : i + 5])
    assert frames == [
        spdy.SynStream(1, False, {"streamtype": ["error"]}),
        spdy.SynStream(3, False, {"streamtype": ["stdin"]}),
        spdy.Data(3, False, b"hello"),
        spdy.Data(3, True, b""),
        spdy.Ping(7),
    ]


def test_the_servers_replies_decompress_with_the_clients_state() -> None:
    client, encoder = Client(), spdy.Encoder()
    first = encoder.syn_reply(1, {})
    second = encoder.syn_reply(3, {"X-Thing": "v"})
    assert client.reply_headers(first) == (2, 1, {})
    assert client.reply_headers(second) == (2, 3, {"x-thing": "v"})
    assert encoder.data(5, b"out", fin=True) == struct.pack(">II", 5, 1 << 24 | 3) + b"out"
    assert encoder.ping(9) == struct.pack(">HHII", 0x8003, 6, 4, 9)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (struct.pack(">HHI", 0x8002, 1, 0), "SPDY version 2"),
        (struct.pack(">II", 1, spdy.MAX_FRAME + 1), "frame of"),
        (struct.pack(">HHI", 0x8003, 1, 12) + b"\0" * 10 + b"zz", "header block"),
    ],
    ids=["old version", "oversized frame", "corrupt headers"],
)
def test_protocol_errors_are_refused(wire: bytes, message: str) -> None:
    with pytest.raises(spdy.SpdyError, match=message):
        spdy.Decoder().feed(wire)
