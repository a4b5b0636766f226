"""Named background loops that must run forever, restarted with back-off when they fail.

A controller process is a handful of loops (informers, workers, the leader elector, a metrics
server). One of them dying silently leaves a process that looks alive and does nothing, so each
runs under the supervisor: an exception is logged at WARNING with its traceback, the loop is
restarted after an exponential back-off (`initial_backoff` doubling to `max_backoff`), and
`problems()` — what `/readyz` shows — names it until it is healthy again. A loop that returns is
restarted too (after a WARNING): these loops are not meant to end. Cancellation is shutdown,
not an error.

Healthy again means: the loop has been running for `healthy_after` seconds since its last
restart, or it called `mark_ready(name)` (e.g. an informer once synced). A loop that has run
that long also starts its next back-off from `initial_backoff` again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["Supervisor"]

_log = logging.getLogger(__name__)


@dataclass
class _Loop:
    name: str
    factory: Callable[[], Awaitable[object]]
    task: asyncio.Task[None] | None = None
    running: bool = False
    started: float = 0.0
    problem: str = ""
    failures: int = field(default=0)


class Supervisor:
    """Starts, restarts and stops named loops."""

    def __init__(
        self,
        *,
        logger: logging.Logger | None = None,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
        healthy_after: float = 5.0,
        stop_grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger or _log
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.healthy_after = healthy_after
        self.stop_grace = stop_grace
        self._clock = clock
        self._loops: dict[str, _Loop] = {}
        self._stopping = False

    def start(self, name: str, factory: Callable[[], Awaitable[object]]) -> None:
        """Run `await factory()` as a task named `name`, forever (call from the event loop)."""
        if name in self._loops:
            raise ValueError(f"a loop named {name!r} is already supervised")
        loop = _Loop(name, factory)
        loop.task = asyncio.create_task(self._run(loop), name=f"supervised-{name}")
        self._loops[name] = loop

    async def cancel(self, name: str) -> None:
        """Stop the one loop `name` (not restarted; its name may be started again) and wait
        for it to end. A loop not supervised (never started, or already cancelled) is a no-op:
        e.g. a leader's loops when leadership ends while the whole supervisor is stopping."""
        loop = self._loops.pop(name, None)
        if loop is None or loop.task is None:
            return
        loop.task.cancel()
        await asyncio.wait({loop.task})
        if not loop.task.cancelled():
            loop.task.exception()  # retrieved: a loop that ended otherwise was reported

    def running(self, name: str) -> bool:
        """True while the loop's factory is running (not while it waits to be restarted)."""
        loop = self._loops.get(name)
        return loop is not None and loop.running

    def mark_ready(self, name: str) -> None:
        """The loop says it works (clears its problem before `healthy_after`)."""
        loop = self._loops.get(name)
        if loop is not None and loop.running:
            loop.problem = ""

    def problems(self) -> dict[str, str]:
        """Loops that failed (or returned) and have not been healthy since: name → why."""
        now = self._clock()
        found = {}
        for loop in self._loops.values():
            if loop.problem and loop.running and now - loop.started >= self.healthy_after:
                loop.problem = ""
            if loop.problem:
                found[loop.name] = loop.problem
        return found

    async def stop(self) -> None:
        """Cancel every loop and wait for them to end. A loop that ends in any way from now on
        is not restarted, even if its factory swallowed the cancellation (a library that turns
        CancelledError into an ordinary return would otherwise keep it restarting forever)."""
        self._stopping = True
        pending = {loop.task for loop in self._loops.values() if loop.task is not None}
        grace = self.stop_grace
        while pending:
            for task in pending:
                task.cancel()
            # Cancelled again if still running after a grace period: a cancellation can be lost
            # in a race (see kube.leader), and stopping must not depend on every library getting
            # it right. The grace lets clean-up that takes a while (releasing a Lease) finish
            # before a second cancellation would interrupt it.
            _, pending = await asyncio.wait(pending, timeout=grace)
            grace = 1.0
        self._loops.clear()

    async def _run(self, loop: _Loop) -> None:
        while True:
            loop.running = True
            loop.started = self._clock()
            try:
                await loop.factory()
            except asyncio.CancelledError:
                loop.running = False
                raise
            except Exception as e:
                problem = f"{type(e).__name__}: {e}"
                error: BaseException | None = e
            else:
                problem = "returned (it should run until cancelled)"
                error = None
            loop.running = False
            if self._stopping:
                return
            if self._clock() - loop.started >= self.healthy_after:
                loop.failures = 0
            delay = min(self.max_backoff, self.initial_backoff * 2 ** min(loop.failures, 30))
            loop.failures += 1
            loop.problem = problem
            if error is not None:
                self._log.warning(
                    "%s failed, restarting in %.1fs: %s", loop.name, delay, problem, exc_info=error
                )
            else:
                self._log.warning("%s %s; restarting in %.1fs", loop.name, problem, delay)
            await asyncio.sleep(delay)
