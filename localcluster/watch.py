"""Watch fan-out: committed events go to every matching subscriber through an in-memory queue.

`Storage` calls `Hub.publish` synchronously right after each commit, in resourceVersion order,
so a subscriber sees events in commit order with no gaps. A watch that starts from a version
reads the backlog from the storage log and subscribes in the same event-loop step (no await in
between), which makes "backlog + live" exact.

Selector semantics follow kube-apiserver's watch cache: an object that starts matching a
filtered watch arrives as ADDED, one that stops matching as DELETED.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable
from dataclasses import dataclass, field

from localcluster.selectors import Selector
from localcluster.storage import Event

__all__ = ["Hub", "Subscription", "WatchFilter", "translate"]

# A subscriber that falls this far behind is cut off (its client re-lists, as with a real server).
MAX_BACKLOG = 100_000


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
    """One watcher's queue of (type, event); `None` in the queue means "closed by the server"."""

    def __init__(self, hub: Hub, flt: WatchFilter, max_backlog: int | None = MAX_BACKLOG) -> None:
        self.hub = hub
        self.filter = flt
        self.max_backlog = max_backlog
        self.queue: asyncio.Queue[tuple[str, Event] | None] = asyncio.Queue()
        self.overflowed = False

    def offer(self, event: Event) -> None:
        typ = translate(self.filter, event)
        if typ is None or self.overflowed:
            return
        if self.max_backlog is not None and self.queue.qsize() >= self.max_backlog:
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait((typ, event))

    def backlog(self, events: Iterable[Event]) -> None:
        for event in events:
            self.offer(event)

    def drain(self) -> list[tuple[str, Event] | None]:
        items = []
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        return items

    def close(self) -> None:
        self.hub.unsubscribe(self)


class Hub:
    def __init__(self) -> None:
        self._by_resource: dict[str | None, set[Subscription]] = collections.defaultdict(set)

    def subscribe(self, flt: WatchFilter, *, max_backlog: int | None = MAX_BACKLOG) -> Subscription:
        """A new subscriber; `max_backlog=None` for in-process controllers that must not be cut off."""
        sub = Subscription(self, flt, max_backlog)
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

    @property
    def subscribers(self) -> int:
        return sum(len(s) for s in self._by_resource.values())
