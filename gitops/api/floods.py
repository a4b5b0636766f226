"""Push floods bounded: the push hook needs no token, so anyone who reaches it can post as fast
as they like, and each accepted push writes a refresh request to every matching JobRepository.
A token bucket per source address (`PER_SOURCE_QPS`, `PER_SOURCE_BURST`) and one for every
source together (`TOTAL_QPS`, `TOTAL_BURST`) keep that bounded: a push over either is answered
429 with Retry-After and does nothing. A Git host sends one push per `git push`, far below
both; one flooding source exhausts its own bucket, not the others'.

Pure but for the buckets' state: the caller passes the loop's monotonic time.
"""

from __future__ import annotations

from collections import OrderedDict

from kube.ratelimit import TokenBucket

__all__ = [
    "PER_SOURCE_BURST",
    "PER_SOURCE_QPS",
    "TOTAL_BURST",
    "TOTAL_QPS",
    "PushLimiter",
]

PER_SOURCE_QPS, PER_SOURCE_BURST = 2.0, 20
TOTAL_QPS, TOTAL_BURST = 20.0, 100
_SOURCES = 4096
"""Sources remembered at once; the least recently seen is forgotten first (it starts again
with a full bucket, which bounds what forgetting can give away)."""


class PushLimiter:
    def __init__(
        self,
        per_source: tuple[float, int] = (PER_SOURCE_QPS, PER_SOURCE_BURST),
        total: tuple[float, int] = (TOTAL_QPS, TOTAL_BURST),
    ) -> None:
        self._per_source = per_source
        self._total = TokenBucket(*total)
        self._sources: OrderedDict[str, TokenBucket] = OrderedDict()

    def admit(self, source: str, now: float) -> float:
        """0 when a push from `source` at `now` may go on; else the seconds to wait before
        asking again (nothing is taken from the buckets for a refused push)."""
        bucket = self._sources.pop(source, None) or TokenBucket(*self._per_source)
        self._sources[source] = bucket
        while len(self._sources) > _SOURCES:
            self._sources.popitem(last=False)
        wait = _try(bucket, now)
        if wait:
            return wait
        wait = _try(self._total, now)
        if wait:
            bucket.tokens += 1.0  # refused overall: the source's token goes back
        return wait


def _try(bucket: TokenBucket, now: float) -> float:
    """Take a token if one is there; else the wait for it, the bucket as it was."""
    wait = bucket.reserve(now)
    if wait > 0:
        bucket.tokens += 1.0  # not taken
    return wait
