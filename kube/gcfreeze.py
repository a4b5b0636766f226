"""Garbage collection without long event-loop stalls: one loop per process (`kube.Manager`).

Why: CPython's cyclic collector traverses every tracked container in a full (generation 2)
collection, holding the GIL throughout, so the event loop — lease renewals, watches, the HTTP
API — stands still meanwhile. With the caches of 10,000 jobs and a repository's comparison in
memory a full collection took up to 4.6 s on two loaded cores (16 of them, 18.6 s in all,
during one first sync of 10,000 jobs: docs/PERFORMANCE.md); they come whenever enough new
long-lived containers accumulate, i.e. exactly when the process works hardest.

Policy: at start, the young generations' threshold raised (JSON parsing allocates in bursts)
and a full collection before the first freeze; then every `period` seconds, collect the young generations (cheap: the cyclic garbage
among recent objects goes) and `gc.freeze()` what survives: the permanent generation is
never traversed, so later full collections visit only what was allocated since the last
freeze. Frozen objects that die are still freed at once by reference counting (API objects,
dataclasses: no cycles); cyclic garbage among them would be kept, so every `full_every`
seconds everything is unfrozen and collected in one full pass (the one stall left, hourly by
default, instead of one at every burst of work).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FULL_EVERY", "PERIOD", "GcFreeze", "step"]

PERIOD = 10.0
"""Seconds between freezes."""
FULL_EVERY = 3600.0
"""Seconds between full collections of everything (frozen objects included)."""


def step(now: float, last_full: float, full_every: float) -> str:
    """What to do at `now`: "full" (unfreeze, collect everything, freeze) once `full_every`
    seconds passed since `last_full`, else "freeze" (collect the young, freeze)."""
    return "full" if now - last_full >= full_every else "freeze"


@dataclass
class GcFreeze:
    """The loop (`run`), its settings and what it did (`freezes`, `full`)."""

    period: float = PERIOD
    full_every: float = FULL_EVERY
    threshold: tuple[int, int, int] | None = (10_000, 10, 10)
    """Set at start (None: left alone): young collections every 10,000 allocations instead of
    every 700 — a reconcile or a round parses JSON, which allocates in bursts."""
    clock: Callable[[], float] = time.monotonic
    freezes: int = 0
    full: int = 0

    async def run(self) -> None:
        if self.threshold is not None:
            gc.set_threshold(*self.threshold)
        last_full = self.clock()
        self.once("full")  # what start-up loaded (modules, schemas) out of the collector's sight
        while True:
            await asyncio.sleep(self.period)
            now = self.clock()
            what = step(now, last_full, self.full_every)
            if what == "full":
                last_full = now
            self.once(what)

    def once(self, what: str) -> None:
        if what == "full":
            gc.unfreeze()
            gc.collect()
            self.full += 1
        else:
            gc.collect(1)
        gc.freeze()
        self.freezes += 1
