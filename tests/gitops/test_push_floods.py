"""Push floods bounded (`gitops.api.floods`): a token bucket per source and one in all; a push
over either is answered 429 with Retry-After before its body is read, and refreshes nothing."""

from __future__ import annotations

import pytest

from gitops.api.floods import PushLimiter
from tests.gitops.test_api import FakeHub, body, client_for, pushes


def test_a_source_gets_its_burst_then_its_rate() -> None:
    limiter = PushLimiter(per_source=(2.0, 3), total=(100.0, 100))
    assert [limiter.admit("10.0.0.1", 0.0) for _ in range(3)] == [0, 0, 0]
    assert limiter.admit("10.0.0.1", 0.0) == pytest.approx(0.5)
    assert limiter.admit("10.0.0.1", 0.5) == 0  # one token accrued in 0.5 s at 2/s
    assert limiter.admit("10.0.0.2", 0.5) == 0  # another source has a bucket of its own


def test_the_total_bounds_many_sources_and_a_refused_push_costs_its_source_nothing() -> None:
    limiter = PushLimiter(per_source=(1.0, 2), total=(1.0, 3))
    assert [limiter.admit(f"10.0.0.{i}", 0.0) for i in range(3)] == [0, 0, 0]
    assert limiter.admit("10.0.0.9", 0.0) == pytest.approx(1.0)  # over the total
    assert limiter.admit("10.0.0.9", 1.0) == 0  # its own bucket was not charged


def test_refused_pushes_take_no_tokens() -> None:
    limiter = PushLimiter(per_source=(1.0, 1), total=(100.0, 100))
    assert limiter.admit("a", 0.0) == 0
    for _ in range(50):  # hammering does not push the next token further away
        assert limiter.admit("a", 0.0) == pytest.approx(1.0)
    assert limiter.admit("a", 1.0) == 0


async def test_a_flood_is_answered_429_and_refreshes_nothing_more() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        answers = []
        for _ in range(30):
            response = await client.post(
                "/api/v1/webhooks/git",
                json={"repository": "https://github.com/org/jobs", "ref": "refs/heads/main"},
            )
            answers.append(response.status)
            if response.status == 429:
                refused = response
                assert await body(refused) == {
                    "error": "too many pushes from this address or in all: retry later"
                }
                assert int(refused.headers["Retry-After"]) >= 1
    accepted = answers.count(202)
    assert answers[:accepted] == [202] * accepted and 429 in answers
    assert 20 <= accepted < 30  # the burst (20), and at most a few more tokens accrued
    assert len(pushes(hub)) == accepted
