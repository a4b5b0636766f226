"""Large reviews take bounded lanes and a worker thread; small ones are never queued behind
them (docs/WEBHOOK.md, "Limits"). The flood's numbers are in docs/PERFORMANCE.md."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import policies
from kube.connlimits import ConnectionLimits
from tests.webhook.conftest import Webhook
from tests.webhook.reviews import example, review
from webhook.app import Settings
from webhook.server import RunningServer, ServerConfig, start

ONE_LANE = Settings(large_concurrency=1, lane_timeout=0.5, body_timeout=5.0)


def _large_review(bulk: int = 512 * 1024) -> bytes:
    job, _ = policies.default(example("tensorflow-mnist"))
    job["metadata"]["annotations"] = {"bulk": "x" * bulk}
    return json.dumps(review(job)).encode()


@pytest.fixture
async def one_lane(cert_dir: Path) -> AsyncIterator[RunningServer]:
    config = ServerConfig(cert_dir=cert_dir, host="127.0.0.1", port=0, settings=ONE_LANE)
    server = await start(config)
    yield server
    await server.close()


async def _hold_the_lane(server: RunningServer, ctx: ssl.SSLContext, length: int):
    """A connection that announced a large body and sent only its start: it holds a lane."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=ctx, server_hostname="localhost"
    )
    writer.write(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {length}\r\n\r\n".encode()
        + b'{"apiVersion"'
    )
    await writer.drain()
    return reader, writer


async def test_a_large_review_is_answered_as_a_small_one_is(webhook: Webhook) -> None:
    body = _large_review()
    assert len(body) > Settings().large_body_bytes
    status, answer = await webhook.post("/validate", body)
    assert status == 200 and isinstance(answer, dict)
    assert answer["response"]["allowed"] is True
    status, answer = await webhook.post("/mutate", body)
    assert status == 200 and isinstance(answer, dict)
    assert answer["response"]["allowed"] is True


async def test_a_large_review_waits_for_a_lane_and_gets_503_when_none_frees_in_time(
    one_lane: RunningServer, client_context: ssl.SSLContext
) -> None:
    holder = await _hold_the_lane(one_lane, client_context, 400 * 1024)
    try:
        connector = aiohttp.TCPConnector(ssl=client_context)
        async with aiohttp.ClientSession(connector=connector) as session:
            url = f"https://127.0.0.1:{one_lane.port}/validate"
            # A small review is answered at once, while the only large lane is taken.
            started = time.monotonic()
            async with session.post(url, json=review(example("tensorflow-mnist"))) as resp:
                assert resp.status == 200
            assert time.monotonic() - started < ONE_LANE.lane_timeout
            # A second large one waits for the lane, then is refused: 503, saying why.
            async with session.post(url, data=_large_review()) as resp:
                assert resp.status == 503
                text = await resp.text()
            assert "too many large reviews in progress" in text
    finally:
        holder[1].close()


async def test_a_large_review_gets_the_lane_once_it_is_free(
    one_lane: RunningServer, client_context: ssl.SSLContext
) -> None:
    _, writer = await _hold_the_lane(one_lane, client_context, 400 * 1024)
    connector = aiohttp.TCPConnector(ssl=client_context)
    async with aiohttp.ClientSession(connector=connector) as session:
        url = f"https://127.0.0.1:{one_lane.port}/validate"
        waiting = asyncio.ensure_future(session.post(url, data=_large_review()))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        writer.transport.abort()  # the holder leaves: its lane is released
        async with await waiting as resp:
            assert resp.status == 200
            answer = await resp.json()
        assert answer["response"]["allowed"] is True


async def test_a_body_announced_over_the_limit_is_refused_without_taking_a_lane(
    one_lane: RunningServer, client_context: ssl.SSLContext
) -> None:
    holder = await _hold_the_lane(one_lane, client_context, 400 * 1024)
    try:
        reader, writer = await _hold_the_lane(one_lane, client_context, 8 * 1024 * 1024)
        async with asyncio.timeout(5):
            answer = await reader.read()
        assert answer.startswith(b"HTTP/1.1 413 ")
        writer.close()
    finally:
        holder[1].close()


@pytest.fixture
async def two_connections(cert_dir: Path) -> AsyncIterator[RunningServer]:
    config = ServerConfig(
        cert_dir=cert_dir,
        host="127.0.0.1",
        port=0,
        settings=ONE_LANE,
        limits=ConnectionLimits(max_connections=2),
    )
    server = await start(config)
    yield server
    await server.close()


async def _connect(server: RunningServer, ctx: ssl.SSLContext):
    return await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=ctx, server_hostname="localhost"
    )


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    body = json.dumps(review(example("tensorflow-mnist"))).encode()
    writer.write(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    async with asyncio.timeout(5):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)  # the answer's body: the connection is reused
    return head


async def test_a_connection_over_the_limit_takes_the_slot_of_the_longest_idle_one(
    two_connections: RunningServer, client_context: ssl.SSLContext
) -> None:
    first = await _connect(two_connections, client_context)
    second = await _connect(two_connections, client_context)
    assert (await _ask(*first)).startswith(b"HTTP/1.1 200 ")
    assert (await _ask(*second)).startswith(b"HTTP/1.1 200 ")

    third = await _connect(two_connections, client_context)
    assert (await _ask(*third)).startswith(b"HTTP/1.1 200 ")
    async with asyncio.timeout(5):
        assert await first[0].read() == b""  # idle longest: closed, nothing more sent
    assert (await _ask(*second)).startswith(b"HTTP/1.1 200 ")
    assert two_connections.guard.open == 2
    assert two_connections.guard.stats["evicted"] == 1
    for _, writer in (first, second, third):
        writer.close()
