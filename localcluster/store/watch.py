"""Watch fan-out: committed events go to every matching subscriber through an in-memory queue.

`Storage` calls `Hub.publish` synchronously right after each commit, in resourceVersion order,
so a subscriber sees events in commit order with no gaps. A watch that starts from a version
reads the backlog from the storage log and subscribes in the same event-loop step (no await in
between), which makes "backlog + live" exact.

Selector semantics follow kube-apiserver's watch cache: an object that starts matching a
filtered watch arrives as ADDED, one that stops matching as DELETED.

Every subscriber's queue is bounded, by count and by bytes (the JSON size of the queued objects).
Publishing never waits: a subscriber that falls behind past either bound is cut off at once. Its
queue ends with `None`, `overflowed` is set, it is removed from the hub (so it holds no more than
the bound), and `on_overflow` is called. Like a watcher that gets 410 Gone, the subscriber then
starts over from a fresh list: the HTTP watch answers an `ERROR` event with a 410 Expired Status
(clients re-list), the in-process controllers re-subscribe and re-read every object. The
backlog a watch replays from the event log does not count against the bound: the log itself is
bounded.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from localcluster.store.records import Event
from localcluster.store.selectors import Selector

__all__ = ["Hub", "Subscription", "WatchFilter", "translate"]

# A subscriber that falls this far behind is cut off (its client re-lists, as with a real server).
MAX_BACKLOG = 100_000
MAX_BACKLOG_BYTES = 256 * 1024 * 1024

Item = tuple[str, Any] | None  # (type, Event); None: closed by the server


@dataclass(frozen=True)
class WatchFilter:
    resource: str | None  # None: every resource (controllers inside the server)
    namespace: str | None = None
    selector: Selector = field(default_factory=Selector)


def translate(flt: WatchFilter, event: Event) -> str | None:
    """The event type this filter's subscriber sees for `event`, or None to skip it."""
    if flt.resource is not None and event.resource != flt.resource:
        return None
    if flt.namespace and event.namespace != flt.namespace:
        return None
    if flt.selector.empty:
        return event.type
    now = flt.selector.matches(event.obj)
    if event.type == "ADDED":
        return "ADDED" if now else None
    if event.type == "DELETED":
        return "DELETED" if now else None
    before = event.old is not None and flt.selector.matches(event.old)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    if before:
        return "DELETED"
    return None


class Subscription:
    """One subscriber's bounded queue of (type, event); `None` means "closed by the server"."""

    def __init__(
        self,
        hub: Hub,
        flt: WatchFilter,
        max_backlog: int = MAX_BACKLOG,
        max_bytes: int = MAX_BACKLOG_BYTES,
    ) -> None:
        self.hub = hub
        self.filter = flt
        self.max_backlog = max_backlog
        self.max_bytes = max_bytes
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.queued_bytes = 0
        self.overflowed = False
        self.on_overflow: Callable[[], None] | None = None

    def offer(self, event: Event) -> None:
        self._offer(event, bounded=True)

    def backlog(self, events: Iterable[Event]) -> None:
        for event in events:
            self._offer(event, bounded=False)

    def _offer(self, event: Event, *, bounded: bool) -> None:
        typ = translate(self.filter, event)
        if typ is None or self.overflowed:
            return
        size = len(event.raw)
        if bounded and (
            self.queue.qsize() >= self.max_backlog or self.queued_bytes + size > self.max_bytes
        ):
            self._overflow()
            return
        self.queued_bytes += size
        self.queue.put_nowait((typ, event))

    def _overflow(self) -> None:
        self.overflowed = True
        self.hub.unsubscribe(self)
        self.queue.put_nowait(None)
        if self.on_overflow is not None:
            self.on_overflow()

    def put(self, item: Item) -> None:
        """Queue an item of the subscriber's own (a marker); it does not count against the bound."""
        self.queue.put_nowait(item)

    def empty(self) -> bool:
        return self.queue.empty()

    async def get(self) -> Item:
        return self._taken(await self.queue.get())

    def get_nowait(self) -> Item:
        return self._taken(self.queue.get_nowait())

    def drain(self) -> list[Item]:
        items = []
        while not self.queue.empty():
            items.append(self.get_nowait())
        return items

    def _taken(self, item: Item) -> Item:
        if item is not None and isinstance(item[1], Event):
            self.queued_bytes -= len(item[1].raw)
        return item

    def close(self) -> None:
        self.hub.unsubscribe(self)


class Hub:
    """Fan-out to subscribers, each bounded by `max_backlog` events and `max_bytes` bytes."""

    def __init__(
        self, *, max_backlog: int = MAX_BACKLOG, max_bytes: int = MAX_BACKLOG_BYTES
    ) -> None:
        self.max_backlog = max_backlog
        self.max_bytes = max_bytes
        self._by_resource: dict[str | None, set[Subscription]] = collections.defaultdict(set)

    def subscribe(self, flt: WatchFilter) -> Subscription:
        sub = Subscription(self, flt, self.max_backlog, self.max_bytes)
        self._by_resource[flt.resource].add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._by_resource[sub.filter.resource].discard(sub)

    def publish(self, event: Event) -> None:
        for sub in tuple(self._by_resource.get(event.resource, ())):
            sub.offer(event)
        for sub in tuple(self._by_resource.get(None, ())):
            sub.offer(event)

    def close_all(self) -> None:
        for subs in self._by_resource.values():
            for sub in subs:
                sub.queue.put_nowait(None)

    def close_resource(self, resource: str) -> None:
        """End the watches of a resource that is no longer served (its CRD was deleted)."""
        for sub in tuple(self._by_resource.get(resource, ())):
            sub.queue.put_nowait(None)

    def subscribers_of(self, resource: str | None) -> int:
        """Subscribers to one resource id (`None`: the ones that see every resource)."""
        return len(self._by_resource.get(resource, ()))

    @property
    def subscribers(self) -> int:
        return sum(len(s) for s in self._by_resource.values())
