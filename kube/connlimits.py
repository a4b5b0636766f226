"""Connection limits for an aiohttp server that untrusted clients can reach.

A server's connection slots are a shared resource: a client that connects and sends its request
slowly (or never) holds one as surely as a client being served. Without limits, 100 TLS
connections that send `POST /validate HTTP/1.1\\r\\nHost: x\\r\\n` and stop held every slot of
the admission webhook for two minutes, and with `failurePolicy: Fail` every job write in the
cluster failed. This module holds a connection to deadlines and caps, the way Go's `net/http`
server does with `ReadHeaderTimeout` and `IdleTimeout`, plus two caps:

- **TLS handshake**: done within `handshake_timeout`, and at most `max_handshakes` in progress
  (`max_handshakes_per_source` from one address): a new connection over either takes the place
  of the handshake in progress longest (`kube.handshakes`: the listener accepts plain sockets
  and starts TLS itself, so a connection counts from its accept). A connection counts against
  the connection caps below once its handshake is done;
- **request head**: complete within `header_timeout` of the connection being made or of the
  first byte after the previous response — trickling bytes does not extend it;
- **idle keep-alive**: a connection with no request for `idle_timeout` after its last response
  is closed;
- **body** (optional, `body_timeout`): a request whose body is still incomplete that long after
  its head is cut (servers that answer 408 themselves leave it `None`);
- **per source address**: at most `max_per_source` open connections from one peer address;
- **in total**: at most `max_connections`.

Slow clients cannot exhaust the caps: a new connection over a cap does not wait for a slot, it
takes one from a connection that is not being served — one still sending its request head
first, then an idle one, then one whose body is still arriving (`victim_rank`). Within each
class it takes from the source holding the most connections (`pick_victim_fairly`; from the new
connection's own source when the per-source cap is the one reached), the oldest there (of
bodies, the newest). So a flood takes slots from itself before it takes the few of the API
server. Only connections whose request is complete and being handled are never taken; when
every slot holds one, the new connection is closed at once. So a connection the API server
makes is accepted while any number of slow ones are open, and each slow one is cut at its
deadline or when its slot is needed, whichever comes first.

Use, with aiohttp's low-level server or an application's runner:

    guard = ConnectionGuard(ConnectionLimits(...))
    server = web.Server(guard.wrap_handler(handler))       # or app.middlewares.append(guard.middleware)
    listener = await guard.listen(runner.server, host, port, ssl=ctx)   # instead of a TCPSite

The request hook (`wrap_handler` or `middleware`) tells the guard when a request's head is
complete and when its handler returned; without it every connection would be cut at its header
deadline. aiohttp's own keep-alive timer should be longer than ours (`keepalive_backstop`).
`ConnectionGuard.stats` counts what happened (for metrics and tests); `open`, `open_from` and
`in_phase` say what is open now.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl as ssl_module
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from aiohttp import web

from kube.handshakes import Handshakes, TLSListener

__all__ = [
    "ConnectionGuard",
    "ConnectionLimits",
    "Phase",
    "pick_victim",
    "pick_victim_fairly",
    "victim_rank",
]

log = logging.getLogger(__name__)

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
T = TypeVar("T")


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines (seconds) and caps; defaults sized for an admission webhook (docs/WEBHOOK.md)."""

    max_connections: int = 100
    max_per_source: int = 50
    max_handshakes: int = 128
    max_handshakes_per_source: int = 32
    handshake_timeout: float = 5.0
    header_timeout: float = 5.0
    idle_timeout: float = 120.0
    body_timeout: float | None = None

    def __post_init__(self) -> None:
        if min(self.max_connections, self.max_per_source) < 1:
            raise ValueError("max_connections and max_per_source must be at least 1")
        if min(self.max_handshakes, self.max_handshakes_per_source) < 1:
            raise ValueError("max_handshakes and max_handshakes_per_source must be at least 1")
        timeouts = [self.handshake_timeout, self.header_timeout, self.idle_timeout]
        if self.body_timeout is not None:
            timeouts.append(self.body_timeout)
        if not all(t > 0 and math.isfinite(t) for t in timeouts):
            raise ValueError("timeouts must be positive numbers of seconds")

    @property
    def keepalive_backstop(self) -> float:
        """A keep-alive timeout for aiohttp's own timer that never fires before ours."""
        return self.idle_timeout + self.header_timeout + 1.0


class Phase(StrEnum):
    HEAD = "head"  # connected or sent a byte after a response; request head not complete
    IDLE = "idle"  # answered; no byte of a next request yet
    REQUEST = "request"  # head complete; the handler runs (its body may still be arriving)


def victim_rank(phase: Phase, since: float, body_pending: bool) -> tuple[int, float] | None:
    """How readily a connection gives up its slot to a new one (lower first), or None when it
    must keep it: a request head not yet complete, then idle — each the one in that state
    longest first (`since`, when it entered it) — then a body still arriving, the *newest*
    first: a body may wait unread for its turn (the webhook's lanes), and taking the oldest
    would let a burst of large requests from one client cut each other off before any
    finished; a trickled body is cut at its own deadline anyway."""
    if phase is Phase.HEAD:
        return (0, since)
    if phase is Phase.IDLE:
        return (1, since)
    return (2, -since) if body_pending else None


def pick_victim(candidates: Iterable[T], rank: Callable[[T], tuple[int, float] | None]) -> T | None:
    """The candidate of lowest `rank`, or None when none may be taken."""
    best: T | None = None
    best_rank: tuple[int, float] | None = None
    for candidate in candidates:
        r = rank(candidate)
        if r is not None and (best_rank is None or r < best_rank):
            best, best_rank = candidate, r
    return best


def pick_victim_fairly(
    by_source: Mapping[str, Collection[T]], rank: Callable[[T], tuple[int, float] | None]
) -> T | None:
    """Like `pick_victim` over every source's connections, but within a rank's class (head,
    idle, body) the source holding the most connections gives one up first: a flood from a few
    addresses loses its own slow connections before the API server's, and keeps losing its
    own idle ones before the API server's idle ones."""
    best: T | None = None
    best_key: tuple[int, int, float] | None = None
    for candidates in by_source.values():
        share = len(candidates)
        for candidate in candidates:
            r = rank(candidate)
            if r is None:
                continue
            key = (r[0], -share, r[1])
            if best_key is None or key < best_key:
                best, best_key = candidate, key
    return best


STRAIN_QUIET = 10.0
"""Seconds without an eviction or a refusal before the guard logs that the strain is over."""


class ConnectionGuard:
    """The limits of one listener, and its open connections."""

    def __init__(self, limits: ConnectionLimits, *, name: str = "server") -> None:
        self.limits = limits
        self.name = name
        self.stats: dict[str, int] = dict.fromkeys(
            ("accepted", "refused", "evicted", "cut_head", "cut_idle", "cut_body"), 0
        )
        # Open connections by phase, each dict in the order they entered it (oldest first).
        self._by_phase: dict[Phase, dict[_Guarded, None]] = {p: {} for p in Phase}
        self._by_source: dict[str, dict[_Guarded, None]] = {}
        self._by_handler: dict[object, _Guarded] = {}
        self._strain_last = -math.inf  # when a connection was last evicted or refused
        self._strain_count = 0  # evicted or refused since the strain began
        self.handshakes = Handshakes(
            max_total=limits.max_handshakes,
            max_per_source=limits.max_handshakes_per_source,
            timeout=limits.handshake_timeout,
            name=name,
            stats=self.stats,
        )
        """TLS handshakes in progress (a TLS `listen` only)."""

    @property
    def open(self) -> int:
        return len(self._by_handler)

    def open_from(self, source: str) -> int:
        return len(self._by_source.get(source, ()))

    def in_phase(self, phase: Phase) -> int:
        return len(self._by_phase[phase])

    def open_by_phase(self) -> dict[str, int]:
        """Open connections by phase, and `handshake`: TLS handshakes in progress."""
        counts = {phase.value: len(conns) for phase, conns in self._by_phase.items()}
        return counts | {"handshake": self.handshakes.in_progress}

    def protocol_factory(
        self,
        inner: Callable[[], asyncio.Protocol],
        *,
        setup_transport: Callable[[asyncio.BaseTransport], None] | None = None,
    ) -> Callable[[], asyncio.Protocol]:
        """`inner` (aiohttp's `web.Server`) behind the guard, for `loop.create_server`;
        `setup_transport` runs on every admitted connection before aiohttp sees it."""
        return lambda: _Guarded(self, inner(), setup_transport)

    async def listen(
        self,
        inner: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        *,
        ssl: ssl_module.SSLContext | None = None,
        setup_transport: Callable[[asyncio.BaseTransport], None] | None = None,
        backlog: int = 1024,
    ) -> asyncio.Server | TLSListener:
        """Listen on `host:port` (port 0: any free port); with `ssl`, TLS handshakes under
        their deadline and caps (`kube.handshakes`)."""
        factory = self.protocol_factory(inner, setup_transport=setup_transport)
        if ssl is not None:
            return await TLSListener.listen(
                host, port, self.handshakes, ssl, factory, backlog=backlog
            )
        loop = asyncio.get_running_loop()
        return await loop.create_server(factory, host, port, reuse_address=True, backlog=backlog)

    def wrap_handler(self, handler: Handler) -> Handler:
        """`handler` telling the guard when each request starts and ends (for `web.Server`)."""

        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            return await self._track(request, handler(request))

        return guarded

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The same as `wrap_handler`, as an application middleware."""
        return await self._track(request, handler(request))

    async def _track(
        self, request: web.BaseRequest, handling: Awaitable[web.StreamResponse]
    ) -> web.StreamResponse:
        conn = self._by_handler.get(request.protocol)
        if conn is None:  # (a connection the guard did not admit, or already cut)
            return await handling
        conn.request_started(request)
        try:
            return await handling
        finally:
            conn.request_ended(request)

    # --- bookkeeping (called by _Guarded) ---------------------------------------------------

    def _admit(self, conn: _Guarded, now: float) -> bool:
        limits = self.limits
        same_source = self._by_source.get(conn.source, {})
        victim: _Guarded | None = None
        full = False
        if len(same_source) >= limits.max_per_source:
            full = True
            victim = pick_victim(same_source, _Guarded.rank)
        elif self.open >= limits.max_connections:
            full = True
            victim = pick_victim_fairly(self._by_source, _Guarded.rank)
        if full:
            self._strain(now, "refusing" if victim is None else "evicting")
            if victim is None:
                self.stats["refused"] += 1
                return False
            self.stats["evicted"] += 1
            victim.abort()
        elif self._strain_count and now - self._strain_last > STRAIN_QUIET:
            log.warning(
                "%s: no connection evicted or refused for %gs (%d before)",
                self.name,
                STRAIN_QUIET,
                self._strain_count,
            )
            self._strain_count = 0
        self.stats["accepted"] += 1
        self._by_source.setdefault(conn.source, {})[conn] = None
        self._by_handler[conn.inner] = conn
        self._by_phase[conn.phase][conn] = None
        return True

    def _strain(self, now: float, what: str) -> None:
        if not self._strain_count:
            log.warning(
                "%s: %d connections open (limit %d, %d per source): new ones take the slots "
                "of connections not being served (first: %s)",
                self.name,
                self.open,
                self.limits.max_connections,
                self.limits.max_per_source,
                what,
            )
        self._strain_count += 1
        self._strain_last = now

    def _move(self, conn: _Guarded, old: Phase, new: Phase) -> None:
        self._by_phase[old].pop(conn, None)
        self._by_phase[new][conn] = None

    def _forget(self, conn: _Guarded) -> None:
        self._by_phase[conn.phase].pop(conn, None)
        self._by_handler.pop(conn.inner, None)
        same_source = self._by_source.get(conn.source)
        if same_source is not None:
            same_source.pop(conn, None)
            if not same_source:
                del self._by_source[conn.source]


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's protocol behind the guard's deadlines."""

    __slots__ = (
        "admitted",
        "deadline",
        "guard",
        "inner",
        "open",
        "phase",
        "read_during_request",
        "request",
        "setup",
        "since",
        "source",
        "timer",
        "transport",
    )

    def __init__(
        self,
        guard: ConnectionGuard,
        inner: asyncio.Protocol,
        setup: Callable[[asyncio.BaseTransport], None] | None,
    ) -> None:
        self.guard = guard
        self.inner = inner
        self.setup = setup
        self.transport: asyncio.BaseTransport | None = None
        self.source = ""
        self.open = False  # counted by the guard (until closed, cut or evicted)
        self.admitted = False  # handed to aiohttp
        self.phase = Phase.HEAD
        self.since = 0.0
        self.deadline = math.inf
        self.timer: asyncio.TimerHandle | None = None
        self.request: web.BaseRequest | None = None
        self.read_during_request = False

    def rank(self) -> tuple[int, float] | None:
        pending = self.request is not None and not self.request.content.is_eof()
        return victim_rank(self.phase, self.since, pending)

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer or "")
        self.since = asyncio.get_running_loop().time()
        if not self.guard._admit(self, self.since):
            _abort(transport)
            return
        self.open = self.admitted = True
        self._set_deadline(self.since + self.guard.limits.header_timeout)
        if self.setup is not None:
            self.setup(transport)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.phase is Phase.IDLE:
            self._enter(Phase.HEAD, self.guard.limits.header_timeout)
        elif self.phase is Phase.REQUEST:
            self.read_during_request = True
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.open:
            self._close_books()
        elif self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.admitted:  # (one refused or cut before it was served never reached aiohttp)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # --- the request hook -----------------------------------------------------------------

    def request_started(self, request: web.BaseRequest) -> None:
        self.request = request
        self.read_during_request = False
        body_timeout = self.guard.limits.body_timeout
        pending = not request.content.is_eof()
        self._enter(Phase.REQUEST, body_timeout if (body_timeout and pending) else None)

    def request_ended(self, request: web.BaseRequest) -> None:
        if self.request is not request:
            return
        self.request = None
        if not self.open:
            return
        limits = self.guard.limits
        if self.read_during_request:  # (a pipelined next request, or the rest of a refused body)
            self._enter(Phase.HEAD, limits.header_timeout)
        else:
            self._enter(Phase.IDLE, limits.idle_timeout)

    # --- deadlines ------------------------------------------------------------------------

    def _enter(self, phase: Phase, timeout: float | None) -> None:
        if not self.open:
            self.phase = phase
            return
        now = asyncio.get_running_loop().time()
        self.guard._move(self, self.phase, phase)
        self.phase = phase
        self.since = now
        self._set_deadline(now + timeout if timeout is not None else math.inf)

    def _set_deadline(self, deadline: float) -> None:
        """One timer per connection, rescheduled lazily: a deadline moved later leaves the
        pending timer in place, and it re-arms itself when it fires early."""
        self.deadline = deadline
        if self.timer is None and deadline != math.inf:
            self.timer = asyncio.get_running_loop().call_at(deadline, self._expire)
        elif self.timer is not None and deadline < self.timer.when():
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def _expire(self) -> None:
        self.timer = None
        if not self.open:
            return
        now = asyncio.get_running_loop().time()
        if now < self.deadline:
            self._set_deadline(self.deadline)
            return
        if self.phase is Phase.REQUEST:
            if self.request is None or self.request.content.is_eof():
                self.deadline = math.inf  # the body is in; the handler's time is its own
                return
            self.guard.stats["cut_body"] += 1
        else:
            self.guard.stats[f"cut_{self.phase.value}"] += 1
        log.debug(
            "%s: closing a connection from %s (%s deadline)",
            self.guard.name,
            self.source,
            self.phase.value,
        )
        self.abort()

    def abort(self) -> None:
        """Close at once and give up the slot now (aiohttp hears of it from connection_lost)."""
        if self.open:
            self._close_books()
        if self.transport is not None:
            _abort(self.transport)

    def _close_books(self) -> None:
        self.open = False
        self.guard._forget(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _abort(transport: asyncio.BaseTransport) -> None:
    abort = getattr(transport, "abort", None)  # (uvloop's transports are not asyncio.Transport)
    if abort is not None:
        abort()
    else:
        transport.close()
