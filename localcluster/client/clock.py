"""Time formats of the Kubernetes API (the shell reads the clock; pure code receives strings)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["event_suffix", "micro_time", "rfc3339", "seconds_precision", "utcnow"]

_last_event_ns = 0


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(dt: datetime) -> str:
    """`metav1.Time`: seconds precision."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(dt: datetime) -> str:
    """`metav1.MicroTime`: microseconds precision."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds_precision(ts: str) -> str:
    """`2026-01-01T00:00:01.123456789Z` → `2026-01-01T00:00:01Z`."""
    return ts[:19] + "Z" if len(ts) > 20 else ts


def event_suffix() -> str:
    """The `<hex UnixNano>` that ends a real event's name (`<pod>.<hex>`), strictly increasing
    within this process. Names then sort in the order events happened, which is the order a
    list returns them and `kubectl describe` keeps for events stamped in the same second."""
    global _last_event_ns
    _last_event_ns = max(time.time_ns(), _last_event_ns + 1)
    return f"{_last_event_ns:x}"
