"""`kube.supervise`: a crashing loop is logged with its traceback, restarted with a growing
back-off and reported until healthy; stopping is clean."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

import pytest

from kube.supervise import Supervisor
from tests.support.cluster import aeventually


async def test_a_crashing_loop_is_logged_restarted_with_backoff_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    async def crashes() -> None:
        starts.append(loop.time())
        raise RuntimeError("broken loop")

    supervisor = Supervisor(initial_backoff=0.02, max_backoff=1.0)
    supervisor.start("crasher", crashes)
    try:
        await aeventually(lambda: len(starts) >= 5, timeout=5)
        assert "crasher" in supervisor.problems()
        assert "RuntimeError: broken loop" in supervisor.problems()["crasher"]
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert gaps[3] > gaps[0] * 2  # the back-off grows
        records = [r for r in caplog.records if "crasher" in r.getMessage()]
        assert records and all(r.levelno == logging.WARNING for r in records)
        assert records[0].exc_info and records[0].exc_info[0] is RuntimeError
    finally:
        await supervisor.stop()


async def test_a_loop_that_recovers_is_healthy_once_marked_ready() -> None:
    attempts = []
    supervisor = Supervisor(initial_backoff=0.01, healthy_after=60)

    async def flaky() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise ValueError("not yet")
        supervisor.mark_ready("flaky")
        await asyncio.Event().wait()

    supervisor.start("flaky", flaky)
    try:
        await aeventually(lambda: len(attempts) == 3 and supervisor.running("flaky"))
        await aeventually(lambda: supervisor.problems() == {})
    finally:
        await supervisor.stop()
    assert not supervisor.running("flaky")


async def test_a_loop_is_healthy_again_after_running_for_healthy_after() -> None:
    attempts = []

    async def flaky() -> None:
        attempts.append(1)
        if len(attempts) < 2:
            raise ValueError("once")
        await asyncio.Event().wait()

    supervisor = Supervisor(initial_backoff=0.01, healthy_after=0.2)
    supervisor.start("f", flaky)
    try:
        await aeventually(lambda: supervisor.running("f") and len(attempts) == 2)
        await aeventually(lambda: supervisor.problems() == {}, timeout=3)
    finally:
        await supervisor.stop()


async def test_a_loop_that_returns_is_restarted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    runs = []

    async def returns() -> None:
        runs.append(1)

    supervisor = Supervisor(initial_backoff=0.01)
    supervisor.start("r", returns)
    try:
        await aeventually(lambda: len(runs) >= 3)
        assert "returned" in supervisor.problems()["r"]
        assert any("restarting" in r.getMessage() for r in caplog.records)
    finally:
        await supervisor.stop()


async def test_stop_cancels_running_loops_without_reporting_a_problem(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    supervisor = Supervisor()
    supervisor.start("forever", forever)
    await aeventually(lambda: supervisor.running("forever"))
    assert supervisor.problems() == {}
    await supervisor.stop()
    assert cancelled.is_set()
    assert caplog.records == []
    with pytest.raises(ValueError):
        supervisor.start("x", forever)
        supervisor.start("x", forever)
    await supervisor.stop()


async def test_stop_ends_a_loop_whose_factory_swallows_the_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A factory that catches CancelledError and returns must not be restarted by `stop`
    (it was: `trainops up` then never finished stopping)."""
    supervisor = Supervisor(initial_backoff=0.01)
    entered = asyncio.Event()
    runs = 0

    async def stubborn() -> None:
        nonlocal runs
        runs += 1
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return  # swallowed, as some libraries do

    supervisor.start("stubborn", stubborn)
    await entered.wait()
    caplog.set_level(logging.WARNING)
    await asyncio.wait_for(supervisor.stop(), 2)
    assert runs == 1
    assert not [r for r in caplog.records if "restarting" in r.getMessage()]


async def test_cancel_stops_one_loop_for_good_and_frees_its_name() -> None:
    starts: list[str] = []

    def loop(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            starts.append(name)
            await asyncio.Event().wait()

        return run

    supervisor = Supervisor(initial_backoff=0.01)
    supervisor.start("one", loop("one"))
    supervisor.start("two", loop("two"))
    try:
        await aeventually(lambda: supervisor.running("one") and supervisor.running("two"))
        await supervisor.cancel("one")
        assert not supervisor.running("one") and supervisor.running("two")
        await supervisor.cancel("one")  # no longer supervised: a no-op
        await asyncio.sleep(0.1)  # several back-offs: a cancelled loop is not restarted
        assert starts.count("one") == 1 and supervisor.problems() == {}
        supervisor.start("one", loop("one"))
        await aeventually(lambda: supervisor.running("one"))
        assert starts.count("one") == 2
    finally:
        await supervisor.stop()
