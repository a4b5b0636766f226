"""Push floods bounded: the push hook needs no token, so anyone who reaches it can post as fast
as they like. Two token buckets are asked before a push's body is read — one per source
address (`PER_SOURCE_QPS`, `PER_SOURCE_BURST`) and one for every source together (`TOTAL_QPS`,
`TOTAL_BURST`) — and a push over either is answered 429 with Retry-After and does nothing. A
Git host sends one push per `git push`, far below both; one flooding source exhausts its own
bucket, not the others'.

The total bounds the bodies read and checked, not the rounds: what a push that no secret proves
may trigger is bounded per repository by the reconciler (`gitops.runtime.manager`,
`UNPROVEN_PUSHES`), so a flood naming one tenant's repository costs that repository at most a
round a second, and other tenants' pushes, from other addresses, still get through (the figures:
docs/PERFORMANCE.md, "The push hook flooded").

Pure but for the buckets' state: the caller passes the loop's monotonic time.
"""

from __future__ import annotations

from kube.ratelimit import KeyedBuckets, TokenBucket, try_take

__all__ = [
    "PER_SOURCE_BURST",
    "PER_SOURCE_QPS",
    "TOTAL_BURST",
    "TOTAL_QPS",
    "PushLimiter",
]

PER_SOURCE_QPS, PER_SOURCE_BURST = 2.0, 20
TOTAL_QPS, TOTAL_BURST = 100.0, 200
_SOURCES = 4096
"""Sources remembered at once (`KeyedBuckets`)."""


class PushLimiter:
    def __init__(
        self,
        per_source: tuple[float, int] = (PER_SOURCE_QPS, PER_SOURCE_BURST),
        total: tuple[float, int] = (TOTAL_QPS, TOTAL_BURST),
    ) -> None:
        self._sources = KeyedBuckets(*per_source, keys=_SOURCES)
        self._total = TokenBucket(*total)

    def admit(self, source: str, now: float) -> float:
        """0 when a push from `source` at `now` may go on; else the seconds to wait before
        asking again (nothing is taken from the buckets for a refused push)."""
        bucket = self._sources.bucket(source)
        wait = try_take(bucket, now)
        if wait:
            return wait
        wait = try_take(self._total, now)
        if wait:
            bucket.tokens += 1.0  # refused overall: the source's token goes back
        return wait
