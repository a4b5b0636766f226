"""`kube.connlimits`: which connection gives up its slot (pure), and the guard on a plain-HTTP
aiohttp application through its middleware, as the GitOps API would use it: a body that
trickles is cut at `body_timeout`, and connections whose requests are being handled are never
taken — a new one is refused instead."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kube.connlimits import (
    ConnectionGuard,
    ConnectionLimits,
    Phase,
    pick_victim,
    pick_victim_fairly,
    victim_rank,
)

# name: (phase, since, body pending, expected rank)
RANKS: dict[str, tuple[Phase, float, bool, tuple[int, float] | None]] = {
    "request head not complete": (Phase.HEAD, 5.0, False, (0, 5.0)),
    "idle after a response": (Phase.IDLE, 3.0, False, (1, 3.0)),
    "body still arriving (the newest first)": (Phase.REQUEST, 1.0, True, (2, -1.0)),
    "request complete, being handled": (Phase.REQUEST, 1.0, False, None),
}


@pytest.mark.parametrize(("phase", "since", "pending", "rank"), RANKS.values(), ids=list(RANKS))
def test_how_readily_a_connection_gives_up_its_slot(
    phase: Phase, since: float, pending: bool, rank: tuple[int, float] | None
) -> None:
    assert victim_rank(phase, since, pending) == rank


# name: (candidates as (name, phase, since, pending), the one taken)
VICTIMS: dict[str, tuple[list[tuple[str, Phase, float, bool]], str | None]] = {
    "none open": ([], None),
    "a slow head before an older idle one": (
        [("idle", Phase.IDLE, 1.0, False), ("head", Phase.HEAD, 9.0, False)],
        "head",
    ),
    "the oldest of two slow heads": (
        [("new", Phase.HEAD, 9.0, False), ("old", Phase.HEAD, 2.0, False)],
        "old",
    ),
    "idle before a body still arriving": (
        [("body", Phase.REQUEST, 1.0, True), ("idle", Phase.IDLE, 8.0, False)],
        "idle",
    ),
    "a body still arriving rather than nothing": (
        [("busy", Phase.REQUEST, 1.0, False), ("body", Phase.REQUEST, 4.0, True)],
        "body",
    ),
    "the newest of two bodies still arriving": (
        [("older", Phase.REQUEST, 1.0, True), ("newer", Phase.REQUEST, 4.0, True)],
        "newer",
    ),
    "every one being served: none": (
        [("a", Phase.REQUEST, 1.0, False), ("b", Phase.REQUEST, 2.0, False)],
        None,
    ),
}


@pytest.mark.parametrize(("candidates", "taken"), VICTIMS.values(), ids=list(VICTIMS))
def test_the_connection_that_gives_up_its_slot(
    candidates: list[tuple[str, Phase, float, bool]], taken: str | None
) -> None:
    ranks = {name: victim_rank(phase, since, pending) for name, phase, since, pending in candidates}
    assert pick_victim(ranks, ranks.__getitem__) == taken


# name: (connections by source as {source: [(name, phase, since, pending)]}, the one taken)
FAIR: dict[str, tuple[dict[str, list[tuple[str, Phase, float, bool]]], str | None]] = {
    "a slow head of the source holding the most, though another's is older": (
        {
            "apiserver": [("api-head", Phase.HEAD, 1.0, False)],
            "flood": [("f1", Phase.HEAD, 5.0, False), ("f2", Phase.HEAD, 6.0, False)],
        },
        "f1",
    ),
    "a slow head of a small source before an idle one of a large source": (
        {
            "apiserver": [("api-head", Phase.HEAD, 9.0, False)],
            "flood": [("f1", Phase.IDLE, 1.0, False), ("f2", Phase.IDLE, 2.0, False)],
        },
        "api-head",
    ),
    "the next source when the largest has nothing to give up": (
        {
            "busy": [("b1", Phase.REQUEST, 1.0, False), ("b2", Phase.REQUEST, 1.0, False)],
            "other": [("o1", Phase.IDLE, 9.0, False)],
        },
        "o1",
    ),
    "nothing anywhere": ({"busy": [("b1", Phase.REQUEST, 1.0, False)]}, None),
}


@pytest.mark.parametrize(("by_source", "taken"), FAIR.values(), ids=list(FAIR))
def test_a_slot_is_taken_by_class_then_from_the_source_holding_the_most(
    by_source: dict[str, list[tuple[str, Phase, float, bool]]], taken: str | None
) -> None:
    ranks = {
        name: victim_rank(phase, since, pending)
        for conns in by_source.values()
        for name, phase, since, pending in conns
    }
    names = {source: [c[0] for c in conns] for source, conns in by_source.items()}
    assert pick_victim_fairly(names, ranks.__getitem__) == taken


def test_limits_refuse_nonsense() -> None:
    for bad in ({"max_connections": 0}, {"max_per_source": 0}, {"header_timeout": 0}):
        with pytest.raises(ValueError):
            ConnectionLimits(**bad)
    with pytest.raises(ValueError):
        ConnectionLimits(body_timeout=float("inf"))


class App:
    def __init__(self, guard: ConnectionGuard, server: asyncio.Server) -> None:
        self.guard = guard
        self.server = server
        self.release = asyncio.Event()

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])


@pytest.fixture
async def app() -> AsyncIterator[App]:
    limits = ConnectionLimits(max_connections=2, body_timeout=0.4, header_timeout=5)
    guard = ConnectionGuard(limits, name="test")
    application = web.Application(middlewares=[guard.middleware])
    holder: dict[str, Any] = {}

    async def slow(request: web.Request) -> web.Response:
        await holder["app"].release.wait()
        return web.Response(text="done")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    application.router.add_get("/slow", slow)
    application.router.add_post("/echo", echo)
    runner = web.AppRunner(application, keepalive_timeout=limits.keepalive_backstop)
    await runner.setup()
    assert runner.server is not None
    server = await guard.listen(runner.server, "127.0.0.1", 0)
    holder["app"] = App(guard, server)
    yield holder["app"]
    holder["app"].release.set()
    server.close()
    await runner.cleanup()


async def _open(app: App) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", app.port)


async def test_a_trickling_body_is_cut_at_the_body_deadline(app: App) -> None:
    reader, writer = await _open(app)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    async with asyncio.timeout(5):
        assert await reader.read() == b""
    assert app.guard.stats["cut_body"] == 1
    writer.close()


async def test_connections_being_served_keep_their_slots_and_a_new_one_is_refused(
    app: App,
) -> None:
    busy = [await _open(app) for _ in range(2)]
    for _, writer in busy:
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    async with asyncio.timeout(5):
        while app.guard.in_phase(Phase.REQUEST) < 2:
            await asyncio.sleep(0.01)
    reader, writer = await _open(app)
    async with asyncio.timeout(5):
        assert await reader.read() == b""  # closed at once
    assert app.guard.stats["refused"] == 1 and app.guard.open == 2
    app.release.set()
    for reader, writer in busy:
        async with asyncio.timeout(5):
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        writer.close()
    writer.close()
