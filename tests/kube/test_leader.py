"""`kube.LeaderElector` on a real Lease: one holder at a time, a quick hand-over on release,
a takeover after the lease expires when the holder dies, and LeaderLost when renewal fails."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import Client, LeaderElector, LeaderLost, resources
from tests.support.cluster import Cluster, aeventually

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _elector(client: Client, namespace: str, identity: str, **options: Any) -> LeaderElector:
    """A candidate with short timings: 1 s lease, 0.7 s renew deadline, 0.2 s retry."""
    return LeaderElector(
        client,
        namespace=namespace,
        name="ctl",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.7,
        retry_period=0.2,
        **options,
    )


class Workload:
    """Work that records who runs it and how many run at once."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most_at_once = 0
        self.started: dict[str, float] = {}

    def work(self, who: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            self.running.add(who)
            self.started[who] = time.monotonic()
            self.most_at_once = max(self.most_at_once, len(self.running))
            try:
                await asyncio.Event().wait()
            finally:
                self.running.discard(who)

        return run


async def _stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, LeaderLost):
        await task


async def _lease(client: Client, namespace: str) -> dict[str, Any]:
    return await client.get(resources.LEASES, "ctl", namespace)


async def test_one_of_two_candidates_runs_and_a_release_hands_over_at_once(
    client: Client, namespace: str
) -> None:
    load = Workload()
    a = _elector(client, namespace, "a")
    b = _elector(client, namespace, "b")
    tasks = {
        "a": asyncio.create_task(a.run(load.work("a"))),
        "b": asyncio.create_task(b.run(load.work("b"))),
    }
    try:
        await aeventually(lambda: len(load.running) == 1)
        # Several lease durations: the holder keeps renewing and the other never runs.
        await asyncio.wait(tasks.values(), timeout=1.5)
        assert load.most_at_once == 1 and len(load.running) == 1
        leader = next(iter(load.running))
        standby = "b" if leader == "a" else "a"
        electors = {"a": a, "b": b}
        assert electors[leader].is_leader and not electors[standby].is_leader
        lease = await _lease(client, namespace)
        assert lease["spec"]["holderIdentity"] == leader
        assert MICRO_TIME.match(lease["spec"]["renewTime"])
        assert MICRO_TIME.match(lease["spec"]["acquireTime"])

        stopped = time.monotonic()
        await _stop(tasks[leader])
        await aeventually(lambda: load.running == {standby}, timeout=5)
        assert load.started[standby] - stopped < 0.8  # well before the 1 s lease expires
        assert load.most_at_once == 1
        lease = await _lease(client, namespace)
        assert lease["spec"]["holderIdentity"] == standby
        assert lease["spec"]["leaseTransitions"] >= 1
    finally:
        for task in tasks.values():
            await _stop(task)


async def test_a_holder_that_dies_without_releasing_is_replaced_after_the_lease_expires(
    client: Client, namespace: str
) -> None:
    load = Workload()
    a = _elector(client, namespace, "a", release_on_cancel=False)
    task_a = asyncio.create_task(a.run(load.work("a")))
    await aeventually(lambda: load.running == {"a"})
    b = _elector(client, namespace, "b")
    task_b = asyncio.create_task(b.run(load.work("b")))
    try:
        await asyncio.sleep(0.5)  # b is a standby while a renews (not a wait for a condition)
        assert load.running == {"a"}
        died = time.monotonic()
        await _stop(task_a)
        await aeventually(lambda: load.running == {"b"}, timeout=5)
        assert load.started["b"] - died >= 0.5  # it had to wait for the lease to expire
        lease = await _lease(client, namespace)
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        await _stop(task_a)
        await _stop(task_b)


async def test_a_holder_that_cannot_renew_stops_its_work_and_raises_leader_lost(
    cluster: Cluster, namespace: str
) -> None:
    own = await Client.connect(cluster.kubeconfig, timeout=0.5)
    load = Workload()
    a = _elector(own, namespace, "a")
    task = asyncio.create_task(a.run(load.work("a")))
    try:
        await aeventually(lambda: load.running == {"a"})
        await own.close()  # every renewal fails from now on
        with pytest.raises(LeaderLost):
            await asyncio.wait_for(task, 5)
        assert load.running == set() and not a.is_leader
    finally:
        await _stop(task)


async def test_work_that_returns_releases_the_lease(client: Client, namespace: str) -> None:
    a = _elector(client, namespace, "a")

    async def work() -> str:
        return "done"

    assert await a.run(work) == "done"
    lease = await _lease(client, namespace)
    assert lease["spec"]["holderIdentity"] in ("", None)


def _skewed(minutes: float) -> Callable[[], datetime]:
    return lambda: datetime.now(UTC) + timedelta(minutes=minutes)


async def test_candidates_whose_clocks_differ_by_minutes_never_both_lead(
    client: Client, namespace: str
) -> None:
    """Expiry is judged by observation, not by renewTime against the local clock: a candidate
    ten minutes ahead does not take over from a live holder ten minutes behind (whose renewTime
    looks 20 minutes old to it), and a candidate ten minutes behind does take over from a dead
    holder ten minutes ahead (whose renewTime looks 20 minutes in the future)."""
    load = Workload()
    slow = _elector(client, namespace, "slow", release_on_cancel=False, wall_clock=_skewed(-10))
    fast = _elector(client, namespace, "fast", release_on_cancel=False, wall_clock=_skewed(10))
    late = _elector(client, namespace, "late", wall_clock=_skewed(-10))
    tasks = {"slow": asyncio.create_task(slow.run(load.work("slow")))}
    try:
        await aeventually(lambda: load.running == {"slow"})
        tasks["fast"] = asyncio.create_task(fast.run(load.work("fast")))
        # Three lease durations, each with several of fast's reads: slow renews, fast waits.
        await asyncio.wait(tasks.values(), timeout=3.0)
        assert load.running == {"slow"} and load.most_at_once == 1
        assert not any(t.done() for t in tasks.values())

        died = time.monotonic()
        await _stop(tasks["slow"])  # no release: fast must wait out the lease
        await aeventually(lambda: load.running == {"fast"}, timeout=5)
        assert load.started["fast"] - died >= 0.5

        tasks["late"] = asyncio.create_task(late.run(load.work("late")))
        await asyncio.wait(tasks.values(), timeout=1.5)
        assert load.running == {"fast"}
        died = time.monotonic()
        await _stop(tasks["fast"])
        await aeventually(lambda: load.running == {"late"}, timeout=5)
        assert load.started["late"] - died >= 0.5
        assert load.most_at_once == 1
        lease = await _lease(client, namespace)
        assert lease["spec"]["holderIdentity"] == "late"
        assert lease["spec"]["renewTime"] < datetime.now(UTC).strftime("%Y-%m-%dT%H:%M")
    finally:
        for task in tasks.values():
            await _stop(task)


def test_the_timings_must_nest() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="l", lease_duration=1, renew_deadline=2)  # type: ignore[arg-type]
