"""`kube.workqueue`: de-duplication, one worker per key, re-adds while in flight, delays on the
event loop, the rate limiter's curve, and shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable

import pytest

from kube.workqueue import (
    BucketRateLimiter,
    ExponentialRateLimiter,
    QueueShutDown,
    WorkQueue,
    default_rate_limiter,
    run_workers,
)
from tests.support.cluster import aeventually


async def _get(queue: WorkQueue, timeout: float = 1.0) -> Hashable:
    return await asyncio.wait_for(queue.get(), timeout)


async def test_a_key_queued_twice_is_processed_once() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert len(queue) == 2
    assert [await _get(queue), await _get(queue)] == ["a", "b"]
    assert len(queue) == 0


async def test_a_key_in_flight_is_not_handed_out_and_comes_back_after_done() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert await _get(queue) == "a"
    queue.add("a")  # while processing
    assert len(queue) == 0
    with pytest.raises(TimeoutError):
        await _get(queue, timeout=0.05)
    queue.done("a")
    assert await _get(queue) == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_workers_never_process_one_key_concurrently_and_see_every_readd() -> None:
    queue = WorkQueue(name="t")
    active: set[Hashable] = set()
    overlaps = []
    processed: list[str] = []

    async def handler(key: Hashable) -> None:
        if key in active:
            overlaps.append(key)
        active.add(key)
        await asyncio.sleep(0.01)
        processed.append(str(key))
        if processed.count(str(key)) == 1:
            queue.add(key)  # a change while in flight: must be processed once more
        active.discard(key)

    for key in ("a", "b", "c"):
        queue.add(key)
    workers = asyncio.create_task(run_workers(queue, handler, workers=4))
    await aeventually(lambda: len(processed) == 6)
    queue.shut_down()
    await asyncio.wait_for(workers, 2)
    assert overlaps == []
    assert sorted(processed) == ["a", "a", "b", "b", "c", "c"]


async def test_add_after_fires_in_due_order_and_the_earliest_delay_wins() -> None:
    queue = WorkQueue()
    queue.add_after("late", 0.15)
    queue.add_after("early", 0.05)
    queue.add_after("now", 0)
    queue.add_after("late", 0.5)  # later than pending: ignored
    assert await _get(queue) == "now"
    assert len(queue) == 0
    assert await _get(queue) == "early"
    assert await _get(queue) == "late"


def test_the_exponential_limiter_doubles_from_5ms_to_its_cap_and_forget_resets() -> None:
    limiter = ExponentialRateLimiter(0.005, 1000.0)
    delays = [limiter.when("k") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1000.0 and max(delays) == 1000.0
    assert limiter.num_requeues("k") == 20
    assert limiter.when("other") == 0.005
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0 and limiter.when("k") == 0.005
    for _ in range(500):
        limiter.when("k")
    assert limiter.when("k") == 1000.0


def test_the_token_bucket_allows_a_burst_then_qps() -> None:
    now = [0.0]
    bucket = BucketRateLimiter(10.0, 100, clock=lambda: now[0])
    assert all(bucket.when(i) == 0.0 for i in range(100))
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    now[0] = 10.0
    assert bucket.when("z") == 0.0


def test_the_default_limiter_is_the_max_of_both() -> None:
    limiter = default_rate_limiter()
    assert limiter.when("k") == 0.005
    assert limiter.when("k") == 0.01
    assert limiter.num_requeues("k") == 2
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0


async def test_add_rate_limited_delays_and_forget_resets_the_count() -> None:
    queue = WorkQueue(ExponentialRateLimiter(0.01, 1.0))
    queue.add_rate_limited("k")
    queue.add_rate_limited("k")
    assert queue.num_requeues("k") == 2
    assert await _get(queue) == "k"
    queue.forget("k")
    assert queue.num_requeues("k") == 0


async def test_handler_results_forget_requeue_or_retry_with_the_traceback_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = WorkQueue(ExponentialRateLimiter(0.01, 1.0), name="q")
    calls: dict[Hashable, int] = {}

    def handler(key: Hashable) -> float | None:
        calls[key] = calls.get(key, 0) + 1
        if key == "fails" and calls[key] < 3:
            raise RuntimeError("boom")
        if key == "later" and calls[key] == 1:
            return 0.05
        return None

    for key in ("ok", "fails", "later"):
        queue.add(key)
    caplog.set_level(logging.WARNING)
    workers = asyncio.create_task(run_workers(queue, handler, 2))
    await aeventually(lambda: calls == {"ok": 1, "fails": 3, "later": 2})
    queue.shut_down()
    await asyncio.wait_for(workers, 2)
    assert queue.num_requeues("fails") == 0  # forgotten after the success
    failures = [r for r in caplog.records if "boom" in r.getMessage()]
    assert len(failures) == 2 and all(r.exc_info for r in failures)


async def test_shut_down_drains_then_raises_and_ignores_new_keys() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add_after("delayed", 0.01)
    queue.shut_down()
    queue.add("b")
    assert await _get(queue) == "a"
    with pytest.raises(QueueShutDown):
        await _get(queue)


async def test_a_blocked_get_wakes_on_shut_down() -> None:
    queue = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(getter, 1)


async def test_metrics_hooks_see_adds_gets_and_done() -> None:
    seen: list[tuple[str, str]] = []

    class Metrics:
        def on_add(self, name: str) -> None:
            seen.append(("add", name))

        def on_get(self, name: str, waited_seconds: float) -> None:
            assert waited_seconds >= 0
            seen.append(("get", name))

        def on_done(self, name: str, worked_seconds: float) -> None:
            assert worked_seconds >= 0
            seen.append(("done", name))

    queue = WorkQueue(name="m", metrics=Metrics())
    queue.add("k")
    await queue.get()
    queue.done("k")
    assert seen == [("add", "m"), ("get", "m"), ("done", "m")]


async def test_an_api_error_is_logged_as_a_warning_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A conflict or a timeout is expected now and then and retried: one line, no traceback."""
    from kube.errors import Conflict

    queue = WorkQueue(ExponentialRateLimiter(0.01, 1.0), name="q")
    calls: list[Hashable] = []

    def handler(key: Hashable) -> None:
        calls.append(key)
        if len(calls) == 1:
            raise Conflict(409, "Conflict", "the object has been modified")

    queue.add("k")
    caplog.set_level(logging.WARNING)
    workers = asyncio.create_task(run_workers(queue, handler, 1))
    await aeventually(lambda: len(calls) == 2)
    queue.shut_down()
    await asyncio.wait_for(workers, 2)
    (record,) = [r for r in caplog.records if "modified" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "q: processing k failed (retry 1)" in record.getMessage()


async def test_a_key_is_pending_while_queued_processed_or_delayed_and_not_after() -> None:
    queue = WorkQueue()
    assert not queue.pending("a")
    queue.add("a")
    assert queue.pending("a")
    assert await _get(queue) == "a"
    assert queue.pending("a")  # being processed
    queue.done("a")
    assert not queue.pending("a")
    queue.add_after("a", 0.05)
    assert queue.pending("a") and len(queue) == 0  # waiting for its delay
    assert await _get(queue) == "a"
    queue.done("a")
    assert not queue.pending("a")


async def test_an_urgent_key_is_handed_out_before_the_keys_queued_before_it() -> None:
    queue = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("d", urgent=True)
    queue.add("b", urgent=True)  # waiting in the normal lane: moves to the urgent one
    queue.add("d")  # queued already (urgent): stays where it is
    assert len(queue) == 4
    assert [await _get(queue) for _ in range(4)] == ["d", "b", "a", "c"]
    assert len(queue) == 0


async def test_a_key_made_urgent_while_in_flight_comes_back_urgent_after_done() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert await _get(queue) == "a"
    queue.add("b")
    queue.add("a")  # while processing: normal first,
    queue.add("a", urgent=True)  # then urgent
    queue.done("a")
    assert [await _get(queue), await _get(queue)] == ["a", "b"]
    queue.done("a")
    queue.done("b")
    queue.add("c")
    queue.add("a")  # after done: the normal lane again
    assert [await _get(queue), await _get(queue)] == ["c", "a"]
