"""Client-side rate limiting of API requests, as client-go's `flowcontrol` token bucket: at
most `qps` requests a second on average, `burst` at once after a quiet spell.

`TokenBucket.reserve(now)` is the decision (pure: the caller passes its monotonic clock and
gets how long to wait); `RateLimiter.wait()` sleeps that long. `KeyedBuckets` is a bucket per
key (a source address, a repository) for callers that refuse rather than wait. Every request of a client and of
its impersonating views draws from one bucket, as every request of one `rest.Config` does.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KeyedBuckets", "RateLimiter", "TokenBucket", "try_take"]


@dataclass
class TokenBucket:
    """`qps` tokens a second, at most `burst` stored; a reservation may take the bucket below
    zero, and then waits until its token has accrued."""

    qps: float
    burst: int
    tokens: float = 0.0
    last: float | None = None

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError(
                f"a rate limit needs qps > 0 and burst >= 1 (qps {self.qps}, burst {self.burst})"
            )
        self.tokens = float(self.burst)

    def reserve(self, now: float) -> float:
        """Take one token at `now`; the seconds to wait before using it (0 when it is there)."""
        if self.last is not None:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps


class RateLimiter:
    """A `TokenBucket` on the monotonic clock, for asyncio callers."""

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bucket = TokenBucket(qps, burst)
        self._clock = clock

    async def wait(self) -> None:
        delay = self.bucket.reserve(self._clock())
        if delay > 0:
            await asyncio.sleep(delay)


def try_take(bucket: TokenBucket, now: float) -> float:
    """Take a token if one is there (0); else the seconds until one is, the bucket left as it
    was: a refused caller takes nothing, so hammering does not push the next token away."""
    wait = bucket.reserve(now)
    if wait > 0:
        bucket.tokens += 1.0
    return wait


class KeyedBuckets:
    """A `TokenBucket` of `qps`/`burst` per key, at most `keys` remembered: the least recently
    seen is forgotten first and starts again with a full bucket (which bounds what forgetting
    can give away: one burst)."""

    def __init__(self, qps: float, burst: int, keys: int = 4096) -> None:
        TokenBucket(qps, burst)  # the same check, now rather than at the first key
        self.qps, self.burst, self.keys = qps, burst, keys
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def bucket(self, key: str) -> TokenBucket:
        """The bucket of `key`, marked as the most recently seen."""
        found = self._buckets.pop(key, None) or TokenBucket(self.qps, self.burst)
        self._buckets[key] = found
        while len(self._buckets) > self.keys:
            self._buckets.popitem(last=False)
        return found

    def take(self, key: str, now: float) -> float:
        """`try_take` on the bucket of `key`."""
        return try_take(self.bucket(key), now)
