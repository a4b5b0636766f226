"""Event expiry: kube-apiserver's `--event-ttl` (1 h by default), both Event APIs.

A real API server gives each Event an etcd lease; here a periodic sweep deletes the events whose
newest timestamp is older than the TTL. `event_age` is pure (`now` is a parameter).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

from localcluster.store import storage
from localcluster.write.state import Server

__all__ = ["event_age", "expire_events"]

_EVENT_RIDS = ("/events", "events.k8s.io/events")


async def expire_events(srv: Server, ttl: float) -> None:
    """Sweep forever, a few times per TTL (at least every minute, at most 5 times a second)."""
    interval = max(0.2, min(60.0, ttl / 4))
    while True:
        await asyncio.sleep(interval)
        now = srv.clock()
        for rid in _EVENT_RIDS:
            for rec in srv.store.records(rid):
                if event_age(rec.obj, now) > ttl:
                    meta = rec.obj["metadata"]
                    with contextlib.suppress(storage.StorageError):
                        await srv.store.delete(rid, meta.get("namespace") or "", meta["name"])


def event_age(event: dict[str, Any], now: datetime) -> float:
    """Seconds since the event was last recorded (its newest timestamp)."""
    series = event.get("series") or {}
    stamps = [
        (event.get("metadata") or {}).get("creationTimestamp"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        series.get("lastObservedTime"),
    ]
    newest = None
    for stamp in stamps:
        if isinstance(stamp, str) and stamp:
            try:
                when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                continue
            newest = when if newest is None or when > newest else newest
    return (now - newest).total_seconds() if newest is not None else 0.0
