"""Time formats of the Kubernetes API (the shell reads the clock; pure code receives strings)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["micro_time", "rfc3339", "seconds_precision", "utcnow"]


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
