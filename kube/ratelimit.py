"""Client-side rate limiting of API requests, as client-go's `flowcontrol` token bucket: at
most `qps` requests a second on average, `burst` at once after a quiet spell.

`TokenBucket.reserve(now)` is the decision (pure: the caller passes its monotonic clock and
gets how long to wait); `RateLimiter.wait()` sleeps that long. Every request of a client and of
its impersonating views draws from one bucket, as every request of one `rest.Config` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimiter", "TokenBucket"]


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
