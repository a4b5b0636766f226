"""`kube.Manager`: one cache per (kind, namespace, selector) however many readers ask, indexes
added by a late reader over what is cached, one transform per cache, loops gated by a Lease
(two Managers on one API server: one runs them; the other takes over when it stops or dies),
readiness problems and cache metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from kube import Client, LeaderElection, Manager, resources
from kube.informer import strip_managed_fields
from tests.kube.test_leader import Workload
from tests.support.cluster import aeventually

ALONE = LeaderElection(enabled=False)


def _cm(name: str, namespace: str, team: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": team}},
        "data": {},
    }


def _by_team(obj: dict[str, Any]) -> list[str]:
    return [str(((obj.get("metadata") or {}).get("labels") or {}).get("team") or "")]


def _by_name_length(obj: dict[str, Any]) -> list[str]:
    return [str(len(obj["metadata"]["name"]))]


def _keep(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


@pytest.fixture
async def manager(client: Client) -> AsyncIterator[Manager]:
    running = Manager(client, leader_election=ALONE)
    try:
        yield running
    finally:
        await running.stop()


SAME_CACHE = [
    pytest.param({}, {}, id="kind-only"),
    pytest.param({"namespace": "a"}, {"namespace": "a"}, id="same-namespace"),
    pytest.param({"label_selector": "x=1"}, {"label_selector": "x=1"}, id="same-selector"),
    pytest.param(
        {"transform": strip_managed_fields},
        {"transform": strip_managed_fields, "indexers": {"team": _by_team}},
        id="same-transform-more-indexers",
    ),
]
OTHER_CACHE = [
    pytest.param({}, {"namespace": "a"}, id="namespace"),
    pytest.param({"namespace": "a"}, {"namespace": "b"}, id="other-namespace"),
    pytest.param({}, {"label_selector": "x=1"}, id="selector"),
]


@pytest.mark.parametrize(("first", "second"), SAME_CACHE)
async def test_a_second_reader_of_the_same_key_gets_the_same_informer(
    client: Client, first: dict[str, Any], second: dict[str, Any]
) -> None:
    manager = Manager(client, leader_election=ALONE)
    one = manager.informer(resources.CONFIGMAPS, **first)
    assert manager.informer(resources.CONFIGMAPS, **second) is one
    assert manager.informers() == [one]
    assert set(one.indexers) == set(second.get("indexers") or {})


@pytest.mark.parametrize(("first", "second"), OTHER_CACHE)
async def test_another_namespace_or_selector_is_another_cache(
    client: Client, first: dict[str, Any], second: dict[str, Any]
) -> None:
    manager = Manager(client, leader_election=ALONE)
    one = manager.informer(resources.CONFIGMAPS, **first)
    other = manager.informer(resources.CONFIGMAPS, **second)
    assert other is not one and one.name != other.name
    assert len(manager.informers()) == 2


CONFLICTS = [
    pytest.param(None, strip_managed_fields, "no transform", id="none-then-strip"),
    pytest.param(strip_managed_fields, None, "strip_managed_fields", id="strip-then-none"),
    pytest.param(strip_managed_fields, _keep, "_keep", id="two-functions"),
]


@pytest.mark.parametrize(("first", "second", "named"), CONFLICTS)
async def test_another_transform_for_the_same_cache_is_a_value_error_naming_both(
    client: Client, first: Any, second: Any, named: str
) -> None:
    manager = Manager(client, leader_election=ALONE)
    manager.informer(resources.PODS, transform=first)
    with pytest.raises(ValueError) as caught:
        manager.informer(resources.PODS, transform=second)
    message = str(caught.value)
    assert "pods" in message and named in message
    assert ("no transform" in message) == (first is None or second is None)
    assert "strip_managed_fields" in message


async def test_another_function_under_an_index_name_is_a_value_error(client: Client) -> None:
    manager = Manager(client, leader_election=ALONE)
    manager.informer(resources.PODS, indexers={"team": _by_team})
    manager.informer(resources.PODS, indexers={"team": _by_team})  # the same one again: fine
    with pytest.raises(ValueError, match=r"index 'team' is already .*_by_team.*_by_name_length"):
        manager.informer(resources.PODS, indexers={"team": _by_name_length})


async def test_an_index_added_late_covers_what_is_cached_and_what_comes_after(
    manager: Manager, client: Client, namespace: str
) -> None:
    for name, team in (("a1", "red"), ("a2", "red"), ("b1", "blue")):
        await client.create(resources.CONFIGMAPS, _cm(name, namespace, team))
    first = manager.informer(resources.CONFIGMAPS, namespace=namespace)
    manager.start()
    await manager.wait_synced(timeout=10)
    late = manager.informer(resources.CONFIGMAPS, namespace=namespace, indexers={"team": _by_team})
    assert late is first
    assert [o["metadata"]["name"] for o in late.by_index("team", "red")] == ["a1", "a2"]
    await client.create(resources.CONFIGMAPS, _cm("b2", namespace, "blue"))

    def blue() -> list[str]:
        return [o["metadata"]["name"] for o in late.by_index("team", "blue")]

    await aeventually(lambda: blue() == ["b1", "b2"], timeout=5)
    assert len(manager.informers()) == 1


async def test_an_informer_asked_after_start_is_started_and_reported_until_synced(
    manager: Manager, client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, _cm("x", namespace, "red"))
    manager.start()
    assert manager.problems() == {}
    late = manager.informer(resources.CONFIGMAPS, namespace=namespace)
    assert manager.problems() == {f"informer/{late.name}": "cache not synced yet"}
    await manager.wait_synced(timeout=10)
    assert late.get(namespace, "x") is not None
    assert manager.problems() == {}


async def test_a_crashing_loop_is_a_problem_and_is_restarted(manager: Manager) -> None:
    runs: list[float] = []

    async def crashes() -> None:
        runs.append(time.monotonic())
        raise RuntimeError("broken loop")

    manager.supervisor.initial_backoff = 0.02
    manager.add("crasher", crashes)
    with pytest.raises(ValueError, match="crasher"):
        manager.add("crasher", crashes)
    manager.start()
    await aeventually(lambda: len(runs) >= 2, timeout=5)
    assert manager.problems()["crasher"] == "RuntimeError: broken loop"


async def test_the_metrics_count_each_caches_objects_and_the_held_leases(
    client: Client, namespace: str
) -> None:
    for name in ("a", "b", "c"):
        await client.create(resources.CONFIGMAPS, _cm(name, namespace, "red"))
    manager = Manager(client, leader_election=_fast(namespace, "m"))
    cache = manager.informer(resources.CONFIGMAPS, namespace=namespace, label_selector="team=red")
    manager.add("work", _forever, lease="metrics")
    manager.start()
    try:
        await manager.wait_synced(timeout=10)
        await aeventually(lambda: manager.is_leader("metrics"), timeout=5)
        text = generate_latest(manager.metrics).decode()
        assert f'trainops_cache_objects{{cache="{cache.name}"}} 3.0' in text
        assert f'trainops_cache_synced{{cache="{cache.name}"}} 1.0' in text
        assert f'trainops_cache_relists_total{{cache="{cache.name}"}} 0.0' in text
        assert 'trainops_leader{lease="metrics"} 1.0' in text
    finally:
        await manager.stop()


# -- leases ---------------------------------------------------------------------------------


def _fast(namespace: str, identity: str, **options: Any) -> LeaderElection:
    """Short timings: a 1 s lease, 0.7 s renew deadline, 0.2 s retry."""
    return LeaderElection(
        namespace=namespace,
        lease_duration=1.0,
        renew_deadline=0.7,
        retry_period=0.2,
        identity=identity,
        **options,
    )


async def _forever() -> None:
    await asyncio.Event().wait()


class Runs(Workload):
    """Loops that record which Manager runs them now (test_leader's `Workload`)."""

    loop = Workload.work


@pytest.mark.parametrize("dies", [False, True], ids=["stops", "dies"])
async def test_a_leased_loop_runs_in_one_manager_and_the_other_takes_over(
    client: Client, namespace: str, dies: bool
) -> None:
    runs, always = Runs(), Runs()
    managers = {
        who: Manager(client, leader_election=_fast(namespace, who, release_on_stop=not dies))
        for who in ("a", "b")
    }
    for who, m in managers.items():
        m.add("leased", runs.loop(who), lease="ctl")
        m.add("everywhere", always.loop(who))
        m.start()
    try:
        await aeventually(lambda: len(runs.running) == 1, timeout=5)
        await asyncio.sleep(1.5)  # over a lease duration: the holder renews, the other waits
        assert runs.most_at_once == 1 and len(runs.running) == 1
        assert always.running == {"a", "b"}  # loops without a lease run everywhere
        leader = next(iter(runs.running))
        standby = "b" if leader == "a" else "a"
        assert managers[leader].is_leader("ctl") and not managers[standby].is_leader("ctl")
        assert not managers[leader].is_leader("another")
        lease = await client.get(resources.LEASES, "ctl", namespace)
        assert lease["spec"]["holderIdentity"] == leader

        gone = time.monotonic()
        await managers[leader].stop()
        await aeventually(lambda: runs.running == {standby}, timeout=5)
        waited = runs.started[standby] - gone
        if dies:
            assert waited >= 0.5  # the lease had to expire first
        else:
            assert waited < 0.8  # released: taken at once
        assert runs.most_at_once == 1
        assert managers[standby].is_leader("ctl")
    finally:
        for m in managers.values():
            await m.stop()
    assert runs.running == set() and always.running == set()


async def test_without_leader_election_leased_loops_just_run(
    manager: Manager,
) -> None:
    runs = Runs()
    manager.add("leased", runs.loop("me"), lease="ctl")
    assert manager.leases() == [] and manager.is_leader("ctl")
    manager.start()
    await aeventually(lambda: runs.running == {"me"}, timeout=5)


async def test_a_crash_of_a_leased_loop_restarts_it_without_giving_the_lease_up(
    client: Client, namespace: str
) -> None:
    runs: list[float] = []

    async def crashes_once() -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("first run fails")
        await asyncio.Event().wait()

    manager = Manager(client, leader_election=_fast(namespace, "solo"))
    manager.supervisor.initial_backoff = 0.02
    manager.add("leased", crashes_once, lease="solo")
    manager.start()
    try:
        await aeventually(lambda: len(runs) == 2, timeout=5)
        assert manager.is_leader("solo")
        lease = await client.get(resources.LEASES, "solo", namespace)
        assert lease["spec"]["holderIdentity"] == "solo"
        assert lease["spec"].get("leaseTransitions", 0) == 0
    finally:
        await manager.stop()
    lease = await client.get(resources.LEASES, "solo", namespace)
    assert lease["spec"]["holderIdentity"] == ""  # released on stop


async def test_a_loop_added_while_its_lease_is_held_joins_the_term_at_once(
    client: Client, namespace: str
) -> None:
    runs = Runs()
    manager = Manager(client, leader_election=_fast(namespace, "solo"))
    manager.add("first", runs.loop("first"), lease="late")
    manager.start()
    try:
        await aeventually(lambda: runs.running == {"first"}, timeout=5)
        manager.add("second", runs.loop("second"), lease="late")
        await aeventually(lambda: runs.running == {"first", "second"}, timeout=5)
    finally:
        await manager.stop()
    assert runs.running == set()
