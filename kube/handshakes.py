"""TLS handshakes in progress, capped: a TLS listener whose accepted connections count against
caps (in total and per source address) from the moment they are accepted, not only once their
handshake is done.

asyncio's `create_server(ssl=…)` hands a connection to its protocol only after the handshake,
and tells it nothing of one still shaking hands: 1,000 clients that open TCP and never send a
ClientHello each held a socket, a task and TLS buffers until the handshake deadline, counted
nowhere. Here the listener accepts plain sockets itself (`loop.sock_accept`) and starts TLS on
each (`loop.connect_accepted_socket(ssl=…)`, so no byte is read before the TLS layer is in
place — starting TLS on a connected transport with `start_tls` was tried first, and uvloop
reads before it can be paused). Each handshake is counted until it is done or fails:

- a new connection over a cap does not wait and is not refused: it takes the place of the
  handshake in progress longest (as `kube.connlimits` takes a slow request head's slot), from
  its own source when the per-source cap is the one reached, else from the source with the
  most handshakes in progress. A real client's handshake takes a round trip and some
  milliseconds, a silent one its whole deadline: a flood of silent connections evicts itself;
- each is still bounded by `timeout` (the handshake deadline).

Once done, the TLS transport goes to the protocol `make_protocol()` made at the start (the
guard's connection, which counts against the connection caps from then on).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl as ssl_module
from collections.abc import Callable

__all__ = ["Handshakes", "TLSListener"]

log = logging.getLogger(__name__)

_ACCEPT_RETRY = 0.05
"""Seconds before accepting again after accept() failed (out of file descriptors: the
handshakes and connections being cut free them)."""


class _Handshake:
    __slots__ = ("begun", "since", "sock", "source", "task")

    def __init__(self, sock: socket.socket, source: str, since: float) -> None:
        self.sock = sock
        self.source = source
        self.since = since
        self.begun = False
        self.task: asyncio.Task[None] | None = None


class Handshakes:
    """The handshakes in progress of one listener, and what happened to the others."""

    def __init__(
        self,
        *,
        max_total: int,
        max_per_source: int,
        timeout: float,
        name: str = "server",
        stats: dict[str, int] | None = None,
    ) -> None:
        self.max_total = max_total
        self.max_per_source = max_per_source
        self.timeout = timeout
        self.name = name
        self.stats = stats if stats is not None else {}
        """Counts of `handshakes` started, `handshake_evicted` for a newer one and
        `handshake_failed` (the deadline, a bad ClientHello, the peer gone); the guard's own
        `stats` when it makes this."""
        for key in ("handshakes", "handshake_evicted", "handshake_failed"):
            self.stats.setdefault(key, 0)
        self._by_source: dict[str, dict[_Handshake, None]] = {}
        self._count = 0

    @property
    def in_progress(self) -> int:
        return self._count

    def in_progress_from(self, source: str) -> int:
        return len(self._by_source.get(source, ()))

    def start(
        self,
        sock: socket.socket,
        source: str,
        ctx: ssl_module.SSLContext,
        make_protocol: Callable[[], asyncio.Protocol],
    ) -> None:
        """Count `sock`'s handshake (making room first) and start it."""
        loop = asyncio.get_running_loop()
        same = self._by_source.get(source, {})
        victim: _Handshake | None = None
        if len(same) >= self.max_per_source:
            victim = next(iter(same))  # (each source's dict is oldest first)
        elif self._count >= self.max_total:
            most = max(self._by_source.values(), key=len)
            victim = next(iter(most))
        if victim is not None:
            self.stats["handshake_evicted"] += 1
            self._evict(victim)
        shake = _Handshake(sock, source, loop.time())
        self._by_source.setdefault(source, {})[shake] = None
        self._count += 1
        self.stats["handshakes"] += 1
        shake.task = loop.create_task(self._shake(shake, ctx, make_protocol))

    def close(self) -> None:
        """Stop every handshake in progress (the listener is closing)."""
        for same in list(self._by_source.values()):
            for shake in list(same):
                self._evict(shake)

    async def _shake(
        self,
        shake: _Handshake,
        ctx: ssl_module.SSLContext,
        make_protocol: Callable[[], asyncio.Protocol],
    ) -> None:
        shake.begun = True  # from here the socket is the transport's to close
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                make_protocol, shake.sock, ssl=ctx, ssl_handshake_timeout=self.timeout
            )
        except asyncio.CancelledError:
            pass  # evicted, or the listener closed (the transport closed the socket)
        except (OSError, ssl_module.SSLError, TimeoutError) as exc:
            self.stats["handshake_failed"] += 1
            log.debug("%s: a TLS handshake from %s failed: %s", self.name, shake.source, exc)
        finally:
            self._forget(shake)

    def _evict(self, shake: _Handshake) -> None:
        self._forget(shake)
        if shake.task is not None:
            shake.task.cancel()
        if not shake.begun:  # cancelled before it started: nobody else closes the socket
            shake.sock.close()

    def _forget(self, shake: _Handshake) -> None:
        same = self._by_source.get(shake.source)
        if same is None or shake not in same:
            return
        del same[shake]
        self._count -= 1
        if not same:
            del self._by_source[shake.source]


class TLSListener(asyncio.AbstractServer):
    """Listening sockets whose connections start TLS under `Handshakes`; used as an
    `asyncio.Server` is (`sockets`, `close()`, `wait_closed()`; serving from the start)."""

    def __init__(
        self,
        sockets: list[socket.socket],
        handshakes: Handshakes,
        ctx: ssl_module.SSLContext,
        make_protocol: Callable[[], asyncio.Protocol],
    ) -> None:
        self.sockets = sockets
        self.handshakes = handshakes
        self._ctx = ctx
        self._make_protocol = make_protocol
        self._loop = asyncio.get_running_loop()
        self._tasks = [self._loop.create_task(self._accept(s)) for s in sockets]

    @classmethod
    async def listen(
        cls,
        host: str,
        port: int,
        handshakes: Handshakes,
        ctx: ssl_module.SSLContext,
        make_protocol: Callable[[], asyncio.Protocol],
        *,
        backlog: int,
    ) -> TLSListener:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        sockets: list[socket.socket] = []
        try:
            for family, type_, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, type_, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                if port == 0:  # every address on the same free port
                    port = sock.getsockname()[1]
                sock.listen(backlog)
                sock.setblocking(False)
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        return cls(sockets, handshakes, ctx, make_protocol)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return any(not t.done() for t in self._tasks)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for sock in self.sockets:
            sock.close()
        self.handshakes.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: wait for some to be freed
                log.warning("%s: accept failed: %s", self.handshakes.name, exc)
                await asyncio.sleep(_ACCEPT_RETRY)
                continue
            source = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer or "")
            self.handshakes.start(sock, source, self._ctx, self._make_protocol)
