"""A replica's pod on a lost node: restarted elsewhere and counted once, or the job fails."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller.lostnodes import Lost, lost_pod, not_ready_wait
from controller.restarts import crash_loop_delay
from tests.plan.builders import T0, World, at, condition, replica_status, stamp, workers

GRACE = 60.0
RESTARTING = ["OnFailure", "Always", "ExitCode"]
WHO = pytest.mark.parametrize("who", ["mnist-worker-0", "mnist-worker-1"], ids=["master", "worker"])


def node(ready: str | None, since: float | None = None) -> dict[str, Any]:
    conds = []
    if ready is not None:
        cond: dict[str, Any] = {"type": "Ready", "status": ready}
        if since is not None:
            cond["lastTransitionTime"] = stamp(at(since))
        conds.append(cond)
    return {"metadata": {"name": "n2"}, "status": {"conditions": conds}}


def pod(node_name: str | None = "n2", deleting_at: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting_at is not None:
        meta["deletionTimestamp"] = stamp(at(deleting_at))
    return {"metadata": meta, "spec": {"nodeName": node_name} if node_name else {}}


# (pod, node n2 or None, now in seconds after T0, lost?, seconds until lost)
LOST_CASES = {
    "node Ready": (pod(), node("True", 0), 500, False, None),
    "Unknown, grace not over": (pod(), node("Unknown", 0), 59, False, 1.0),
    "Unknown for exactly the grace": (pod(), node("Unknown", 0), 60, True, None),
    "False for longer": (pod(), node("False", 0), 300, True, None),
    "no Ready condition yet": (pod(), node(None), 300, False, None),
    "Ready Unknown without a time": (pod(), node("Unknown"), 300, False, None),
    "node not in the cache": (pod(), None, 300, False, None),
    "pod not scheduled": (pod(None), node("Unknown", 0), 300, False, None),
    "evicted, its grace over, node not Ready": (
        pod(deleting_at=20),
        node("Unknown", 0),
        30,
        True,
        None,
    ),
    "evicted, its grace not over": (pod(deleting_at=40), node("Unknown", 0), 30, False, 10.0),
    "deleted on a Ready node": (pod(deleting_at=0), node("True", 0), 300, False, None),
}


@pytest.mark.parametrize(("p", "n", "now", "lost", "wait"), LOST_CASES.values(), ids=LOST_CASES)
def test_a_pod_is_lost_only_when_its_known_node_stayed_not_ready_for_the_grace(
    p: dict[str, Any], n: dict[str, Any] | None, now: float, lost: bool, wait: float | None
) -> None:
    nodes = {"n2": n} if n is not None else {}
    found = lost_pod(p, nodes, at(now), GRACE)
    assert (found is not None) is lost
    if found is not None:
        assert found.node == "n2"
        assert found.describe().startswith("its node n2 was lost (Ready ")
    assert not_ready_wait(p, nodes, at(now), GRACE) == wait


def test_the_description_names_the_node_and_since_when() -> None:
    lost = Lost("kind-worker2", "Unknown", "2026-12-05T03:00:00Z")
    assert (
        lost.describe()
        == "its node kind-worker2 was lost (Ready Unknown since 2026-12-05T03:00:00Z)"
    )


def two_nodes(policy: str, **spec: Any) -> World:
    """Two workers (worker-0 the master) running on n1 and n2, both Ready since T0."""
    world = World(workers(2, policy, **spec))
    world.settle()
    world.node("n1")
    world.node("n2")
    world.place("mnist-worker-0", "n1")
    world.place("mnist-worker-1", "n2")
    return world


def node_of(who: str) -> str:
    return "n1" if who == "mnist-worker-0" else "n2"


def lose(world: World, who: str) -> None:
    """The node of `who` stops: Ready Unknown from now (the node lifecycle controller)."""
    world.node(node_of(who), "Unknown")


@WHO
@pytest.mark.parametrize("policy", RESTARTING)
def test_a_replica_on_a_lost_node_is_restarted_counted_once_and_force_deleted(
    policy: str, who: str
) -> None:
    world = two_nodes(policy, runPolicy={"backoffLimit": 3})
    uid = world.pods[who]["metadata"]["uid"]
    lose(world, who)
    waiting = world.step(world.tick(20))
    assert waiting.actions == ()  # within the grace: a kubelet may come back
    assert waiting.requeue_after == pytest.approx(40.0)
    assert waiting.status["backoffCount"] == 0

    result = world.step(world.tick(40), act=False)
    (delete,) = result.actions
    assert (delete.verb, delete.name, delete.uid, delete.force) == ("delete", who, uid, True)
    assert delete.keep_log is None  # its log is on the unreachable node
    assert result.status["backoffCount"] == 1
    assert replica_status(result.status, who)["restartCount"] == 1
    assert result.status["phase"] == "Running"
    (event,) = [e for e in result.events if e.reason == "ReplicaRestart"]
    assert f"restarting pod {who} after its node {node_of(who)} was lost" in event.message
    assert f"Ready Unknown since {stamp(at(0))}" in event.message

    # The delete did not go through yet (a stale cache, a crash): asked again, never counted again.
    for _ in range(5):
        again = world.step(world.tick(10), act=False)
        assert [(a.verb, a.name, a.force) for a in again.actions] == [("delete", who, True)]
        assert again.status["backoffCount"] == 1
        assert [e.reason for e in again.events if e.reason == "ReplicaRestart"] == []

    world.apply(again)
    assert world.forced == [who]
    created = world.step()
    assert [(a.verb, a.name) for a in created.actions] == [("create", who)]
    assert world.pods[who]["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    world.place(who, "n2" if node_of(who) == "n1" else "n1")  # the node left
    world.run(who)
    for _ in range(5):
        after = world.step(world.tick(30))
        assert after.actions == ()
        assert after.status["backoffCount"] == 1
        assert after.status["phase"] == "Running"
    assert condition(after.status, "ReplicaFailure")["status"] == "False"


@WHO
def test_under_never_a_replica_on_a_lost_node_fails_the_job_naming_node_and_pod(who: str) -> None:
    world = two_nodes("Never")
    lose(world, who)
    result = world.step(world.tick(61))
    assert result.status["phase"] == "Failed"
    failed = condition(result.status, "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "NodeLost"
    assert f"pod {who} cannot go on: its node {node_of(who)} was lost" in failed["message"]
    assert "restartPolicy Never" in failed["message"]
    assert result.status["backoffCount"] == 0
    # The default clean-up deletes the unfinished pods: the lost one at once (forced).
    forced = [a.name for a in result.actions if a.verb == "delete" and a.force]
    assert forced == [who]
    for _ in range(5):
        later = world.step(world.tick(30))
        assert later.status["phase"] == "Failed"
        assert condition(later.status, "Failed")["message"] == failed["message"]


def test_a_pod_evicted_by_the_taint_manager_counts_as_lost_not_as_a_disruption() -> None:
    """Past the 300 s toleration: Terminating, DisruptionTarget DeletionByTaintManager."""
    world = two_nodes("OnFailure", runPolicy={"backoffLimit": 3})
    world.lost_node_grace = 600.0  # longer than the eviction: the eviction decides
    lose(world, "mnist-worker-1")
    world.tick(300)
    world.terminating("mnist-worker-1", grace=30)
    world.pods["mnist-worker-1"]["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    )
    before = world.step(world.tick(10))
    assert before.actions == ()  # its deletion grace period is not over
    result = world.step(world.tick(20))
    assert [(a.verb, a.name, a.force) for a in result.actions] == [
        ("delete", "mnist-worker-1", True)
    ]
    assert result.status["backoffCount"] == 1
    assert [e.reason for e in result.events] == ["ReplicaRestart"]
    world.settle()
    assert world.step().status["backoffCount"] == 1


def test_a_lost_replica_with_the_backoff_limit_used_up_fails_the_job_naming_it() -> None:
    world = two_nodes("OnFailure", runPolicy={"backoffLimit": 0})
    lose(world, "mnist-worker-1")
    result = world.step(world.tick(60))
    failed = condition(result.status, "Failed")
    assert (result.status["phase"], failed["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert "pod mnist-worker-1 cannot be restarted: its node n2 was lost" in failed["message"]
    assert "backoff limit (0) is used up" in failed["message"]


def test_a_pod_already_deleted_for_a_restart_and_stuck_on_a_lost_node_is_forced_uncounted() -> None:
    world = two_nodes("OnFailure", runPolicy={"backoffLimit": 3})
    world.exit("mnist-worker-1", 1)
    world.pods["mnist-worker-1"]["spec"]["nodeName"] = "n2"
    world.tick(crash_loop_delay(0))
    restart = world.step(act=False)
    assert [(a.verb, a.force) for a in restart.actions] == [("delete", False)]
    assert restart.status["backoffCount"] == 1
    world.terminating("mnist-worker-1")  # the delete is accepted, then the node dies
    lose(world, "mnist-worker-1")
    for _ in range(2):
        stuck = world.step(world.tick(10))
        assert stuck.actions == ()  # its deletion grace period (30 s) runs
    result = world.step(world.tick(10))  # over, and the node not Ready: nobody will confirm
    assert [(a.verb, a.name, a.force) for a in result.actions] == [
        ("delete", "mnist-worker-1", True)
    ]
    assert result.status["backoffCount"] == 1


def test_a_node_back_within_the_grace_changes_nothing() -> None:
    world = two_nodes("Never")
    lose(world, "mnist-worker-1")
    world.step(world.tick(50))
    world.node("n2", "True")
    for _ in range(5):
        result = world.step(world.tick(60))
        assert result.actions == ()
        assert result.requeue_after is None
        assert result.status["phase"] == "Running"


def test_a_paused_jobs_pod_stuck_terminating_on_a_lost_node_is_forced() -> None:
    world = two_nodes("OnFailure")
    world.job["spec"]["runMode"] = {"pause": {"enabled": True}}
    paused = world.step(act=False)
    assert sorted(a.name for a in paused.actions if a.verb == "delete") == [
        "mnist-worker-0",
        "mnist-worker-1",
    ]
    del world.pods["mnist-worker-0"]
    world.terminating("mnist-worker-1")
    lose(world, "mnist-worker-1")
    result = world.step(world.tick(61))
    assert [(a.verb, a.name, a.force) for a in result.actions] == [
        ("delete", "mnist-worker-1", True)
    ]
    assert result.status["backoffCount"] == 0
    assert T0 + timedelta(seconds=61) == world.now


def test_a_finished_jobs_pod_terminating_on_a_not_ready_node_is_timed_then_forced() -> None:
    world = two_nodes("Never")
    world.exit("mnist-worker-0", 0)
    world.pods["mnist-worker-0"]["spec"]["nodeName"] = "n1"
    done = world.step(act=False)
    assert done.status["phase"] == "Succeeded"
    world.terminating("mnist-worker-1", grace=600)  # the clean-up's delete, accepted
    lose(world, "mnist-worker-1")
    waiting = world.step(world.tick(45), act=False)
    assert [a for a in waiting.actions if a.kind == "Pod"] == []
    assert waiting.requeue_after == pytest.approx(15.0)  # the grace's end, no event marks it
    forced = world.step(world.tick(15), act=False)
    assert [(a.verb, a.name, a.force) for a in forced.actions if a.kind == "Pod"] == [
        ("delete", "mnist-worker-1", True)
    ]
    assert forced.status["phase"] == "Succeeded"
