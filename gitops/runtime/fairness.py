"""Fairness between tenants: at most `limit` rounds of one namespace in flight at once.

Without it, a tenant's repositories could hold every worker: six JobRepositories pointing at a
remote that accepts and never answers kept both default workers waiting on git timeouts, and
another namespace's refresh waited minutes (issue #17's shared cluster). With it, a worker that
takes a key whose namespace is at its limit does not wait: the key is parked in its
namespace's waiting line and the worker takes the next key.

No key is lost or starved: when a round of a namespace ends, the first key of that namespace's
line gets the freed slot — reserved for it, so a newcomer of the same namespace cannot take it
first — and is queued again (`Gate.finish` returns it). While a line is not empty its
namespace is at its limit, so newcomers line up behind it (first in, first out).

`Gate` is the decision alone (plain dicts, no I/O, no clock), table-tested; `gated` wraps a
work-queue handler with it.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kube.workqueue import Key, WorkQueue

__all__ = ["DEFAULT_LIMIT", "Gate", "gated", "namespace_of"]

DEFAULT_LIMIT = 1


def namespace_of(key: object) -> str:
    """`team-a` of the key `team-a/repo` (a key without a slash is its own namespace)."""
    return str(key).split("/", 1)[0]


@dataclass
class Gate:
    """Which rounds may start now; one per work queue, used on one event loop."""

    limit: int = DEFAULT_LIMIT
    running: dict[str, int] = field(default_factory=dict)
    """Rounds in flight (or slots reserved) per namespace."""
    waiting: dict[str, deque[str]] = field(default_factory=dict)
    """Parked keys per namespace, first in first out; never empty lists."""
    reserved: set[str] = field(default_factory=set)
    """Keys a slot was freed for, queued again and not yet started."""

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"limit must be at least 1, not {self.limit}")

    def admit(self, key: str) -> bool:
        """True: start the round of `key` now (call `finish` after it). False: it is parked,
        and `finish` of another round of its namespace hands it back."""
        if key in self.reserved:
            self.reserved.discard(key)  # its slot is counted in `running` already
            return True
        ns = namespace_of(key)
        line = self.waiting.get(ns)
        if line is None and self.running.get(ns, 0) < self.limit:
            self.running[ns] = self.running.get(ns, 0) + 1
            return True
        if line is None:
            line = self.waiting[ns] = deque()
        if key not in line:
            line.append(key)
        return False

    def finish(self, key: str) -> str | None:
        """The round of `key` (admitted) ended: the parked key to queue again, its slot
        reserved, or None."""
        ns = namespace_of(key)
        line = self.waiting.get(ns)
        if line:
            nxt = line.popleft()
            if not line:
                del self.waiting[ns]
            self.reserved.add(nxt)
            return nxt  # the slot passes on: `running` stays
        left = self.running.get(ns, 0) - 1
        if left > 0:
            self.running[ns] = left
        else:
            self.running.pop(ns, None)
        return None

    def parked(self) -> int:
        """How many keys wait for a slot of their namespace."""
        return sum(len(line) for line in self.waiting.values())


Handler = Callable[[Key], Awaitable[float | None]]


def gated(queue: WorkQueue, gate: Gate, handler: Handler) -> Handler:
    """`handler` behind `gate`: a key whose namespace is at its limit is parked and the worker
    returns at once (None: nothing to requeue); a finished round queues the next parked key
    of its namespace on `queue`. Nothing is awaited before the decision, so a key's parking
    and its handing back are never interleaved with another worker."""

    async def run(key: Key) -> float | None:
        name = str(key)
        if not gate.admit(name):
            return None
        try:
            result = handler(key)
            return await result if inspect.isawaitable(result) else result
        finally:
            nxt = gate.finish(name)
            if nxt is not None:
                queue.add(nxt)

    return run
