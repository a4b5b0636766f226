"""The client-side rate limit (`kube.ratelimit`): client-go's token bucket, shared by a client
and its impersonating views."""

from __future__ import annotations

import pytest

from kube.client import Client
from kube.config import Config
from kube.ratelimit import KeyedBuckets, RateLimiter, TokenBucket
from tests.support.cluster import Cluster


@pytest.mark.parametrize(
    ("qps", "burst", "times", "waits"),
    [
        pytest.param(10, 3, [0, 0, 0, 0, 0], [0, 0, 0, 0.1, 0.2], id="a burst, then 1/qps apart"),
        pytest.param(10, 1, [0, 0.1, 0.2, 0.3], [0, 0, 0, 0], id="at the rate: no wait"),
        pytest.param(2, 2, [0, 0, 10, 10, 10], [0, 0, 0, 0, 0.5], id="a quiet spell refills"),
        pytest.param(5, 2, [0, 0, 0, 0.1], [0, 0, 0.2, 0.3], id="reservations queue up"),
    ],
)
def test_the_bucket_lets_a_burst_through_then_spaces_requests_by_qps(
    qps: float, burst: int, times: list[float], waits: list[float]
) -> None:
    bucket = TokenBucket(qps, burst)
    assert [round(bucket.reserve(t), 6) for t in times] == waits


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 5), (5, 0)])
def test_a_limit_that_admits_nothing_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
        TokenBucket(qps, burst)


async def test_the_limiter_sleeps_only_when_the_bucket_is_empty() -> None:
    now = [0.0]
    limiter = RateLimiter(1000.0, 2, clock=lambda: now[0])
    for _ in range(2):
        await limiter.wait()
    assert limiter.bucket.tokens == 0
    await limiter.wait()  # one token short: sleeps 1 ms, then goes on
    assert limiter.bucket.tokens == pytest.approx(-1.0)


def test_a_client_and_its_impersonating_views_draw_from_one_bucket() -> None:
    client = Client(Config(server="http://127.0.0.1:1"), qps=5, burst=7)
    limiter = client._http._pool.rate_limiter
    assert limiter is not None and (limiter.bucket.qps, limiter.bucket.burst) == (5, 7)
    view = client.impersonating("system:serviceaccount:team-a:deployer")
    assert view._http._pool.rate_limiter is limiter
    assert Client(Config(server="http://127.0.0.1:1"))._http._pool.rate_limiter is None
    default_burst = Client(Config(server="http://127.0.0.1:1"), qps=4)._http._pool.rate_limiter
    assert default_burst is not None and default_burst.bucket.burst == 8


async def test_requests_wait_their_turn(cluster: Cluster) -> None:
    """Against the API server: with 2 tokens and 50 a second, the third request waits for
    its token (the bucket is below zero until it accrues)."""
    limited = await Client.connect(cluster.kubeconfig, qps=50, burst=2)
    try:
        for _ in range(3):
            await limited.request("GET", "/version")
        assert limited._http._pool.rate_limiter is not None
        assert limited._http._pool.rate_limiter.bucket.tokens < 1
    finally:
        await limited.close()


def test_keyed_buckets_give_each_key_its_own_burst_and_a_refusal_takes_nothing() -> None:
    buckets = KeyedBuckets(1.0, 2)
    assert [buckets.take("a", 0.0) for _ in range(2)] == [0, 0]
    assert buckets.take("a", 0.0) == pytest.approx(1.0)
    for _ in range(10):  # hammering does not push the next token further away
        assert buckets.take("a", 0.5) == pytest.approx(0.5)
    assert buckets.take("b", 0.5) == 0  # another key, another bucket
    assert buckets.take("a", 1.0) == 0


def test_keyed_buckets_forget_the_least_recently_seen_key_first() -> None:
    buckets = KeyedBuckets(1.0, 1, keys=2)
    assert buckets.take("a", 0.0) == 0 and buckets.take("b", 0.0) == 0
    assert buckets.take("a", 0.0) > 0  # a: seen again, so b is now the oldest
    assert buckets.take("c", 0.0) == 0  # b forgotten
    assert buckets.take("a", 0.0) > 0  # a kept its empty bucket
    assert buckets.take("b", 0.0) == 0  # b starts again with a full one (one burst)
