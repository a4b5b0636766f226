"""Restarts in place, the shared budget over them, and every attempt's exit and log.

OnFailure/Always replicas get pods with that restartPolicy and the kubelet restarts them (the
world plays it: `crash`, `restart_in_place`); ExitCode, Never and debug pods are Never and the
controller recreates them, keeping the ended run's log first (docs/CONTROLLER.md, "Restarts").
"""

from __future__ import annotations

from typing import Any

import pytest

from controller import attempts as at
from controller.plan import Plan
from controller.restarts import pod_restart_policy
from tests.plan.builders import (
    World,
    condition,
    replica_status,
    tf,
    verbs,
    with_policy,
    workers,
)
from tests.support.jobs import replica

W0, W1 = "mnist-worker-0", "mnist-worker-1"


@pytest.mark.parametrize(
    ("policy", "master", "debugging", "left", "expected"),
    [
        ("OnFailure", False, False, None, "OnFailure"),
        ("OnFailure", True, False, 3, "OnFailure"),
        ("Always", False, False, 3, "Always"),
        ("Always", True, False, 3, "OnFailure"),  # the master's success ends the job
        ("ExitCode", False, False, 3, "Never"),  # the controller must see the exit code
        ("Never", False, False, 3, "Never"),
        ("OnFailure", False, True, 3, "Never"),  # debug mode restarts nothing
        ("OnFailure", False, False, 0, "Never"),  # no budget: a kubelet restart is not allowed
        ("Always", False, False, 0, "Never"),
    ],
)
def test_the_pods_own_restart_policy(
    policy: str, master: bool, debugging: bool, left: int | None, expected: str
) -> None:
    got = pod_restart_policy(policy, is_master=master, debugging=debugging, budget_left=left)
    assert got == expected


def _bodies(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a.name: a.body for a in World(job).step().actions if a.kind == "Pod" and a.body}


def test_the_plan_creates_pods_with_the_replicas_restart_policy() -> None:
    job = tf(
        replica("chief", restartPolicy="Always"),
        replica("worker", 1, restartPolicy="Always"),
        replica("ps", restartPolicy="ExitCode"),
        replica("evaluator", restartPolicy="OnFailure"),
    )
    policies = {n: b["spec"]["restartPolicy"] for n, b in _bodies(job).items()}
    assert policies == {
        "mnist-chief-0": "OnFailure",
        "mnist-worker-0": "Always",
        "mnist-ps-0": "Never",
        "mnist-evaluator-0": "OnFailure",
    }
    limited = workers(1, "OnFailure", runPolicy={"backoffLimit": 0})
    assert _bodies(limited)[W0]["spec"]["restartPolicy"] == "Never"
    debugging = workers(1, "OnFailure", runMode={"debug": {"enabled": True}})
    assert _bodies(debugging)[W0]["spec"]["restartPolicy"] == "Never"


def _fail_in_place(world: World, name: str, code: int) -> Plan:
    """The run ends, the controller sees it waiting for the kubelet, the kubelet restarts it."""
    world.crash(name, code)
    waiting = world.step()  # holds a unit of budget; keeps the run's log
    world.tick(10)
    world.restart_in_place(name)
    return waiting


def test_a_worker_that_fails_twice_then_succeeds_keeps_its_pod_and_every_attempt() -> None:
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 3}))
    world.settle()
    uid = world.pods[W0]["metadata"]["uid"]
    keeps = []
    for code in (3, 4):
        waiting = _fail_in_place(world, W0, code)
        assert verbs(waiting) == [("keep", "Pod", W0)]  # no delete, no create
        keeps.append(waiting.actions[0].keep_log)
        result = world.step()
        assert verbs(result) == []  # kept already
        assert [e.reason for e in result.events] == ["ReplicaRestart"]
        assert f"pod {W0} was restarted in place after exit code {code}" in result.events[0].message
        entry = replica_status(result.status, W0)
        assert entry["restartCount"] == world.restart_count(W0)  # RESTARTS == the job's count
        assert result.status["backoffCount"] == world.restart_count(W0)
        again = world.step()  # idempotent: same status, no event, nothing kept twice
        assert again.status == result.status and again.events == () and again.actions == ()
    assert [(k.pod, k.previous, k.key) for k in keeps if k] == [
        (W0, True, "worker-0.0.log"),
        (W0, True, "worker-0.1.log"),
    ]
    world.crash(W0, 0)
    done = world.step()
    assert done.status["phase"] == "Succeeded"
    assert world.pods[W0]["metadata"]["uid"] == uid and world.created == [W0]
    entry = replica_status(done.status, W0)
    assert entry["restartCount"] == 2 == done.status["backoffCount"]
    runs = [(a["attempt"], a["exitCode"], "keptLog" in a, a["podUID"]) for a in entry["attempts"]]
    assert runs == [(0, 3, True, uid), (1, 4, True, uid), (2, 0, False, uid)]
    assert entry["attempts"][1]["keptLog"] == {
        "configMap": "mnist-attempts",
        "key": "worker-0.1.log",
    }


def test_a_master_that_always_fails_in_place_fails_the_job_after_exactly_the_limit() -> None:
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 2}))
    world.settle()
    for _ in range(2):
        _fail_in_place(world, W0, 1)
        assert world.step().status["phase"] == "Running"
    world.crash(W0, 1)  # the third run fails: no unit left for the kubelet's restart
    shown = world.restart_count(W0)
    result = world.step()
    assert result.status["phase"] == "Failed"
    failed = condition(result.status, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "backoff limit (2) is used up" in failed["message"]
    (delete,) = [a for a in result.actions if a.kind == "Pod"]
    assert (delete.verb, delete.name, delete.reason) == ("delete", W0, "the job has ended")
    assert delete.keep_log is not None
    assert (delete.keep_log.previous, delete.keep_log.key) == (True, "worker-0.2.log")
    entry = replica_status(result.status, W0)
    assert entry["restartCount"] == 2 == shown == result.status["backoffCount"]
    assert entry["phase"] == "Failed" and entry["containers"][0]["exitCode"] == 1
    world.step()  # the pod is gone: nothing comes back
    for _ in range(3):
        assert [a for a in world.step().actions if a.kind == "Pod"] == []
    assert world.created == [W0] and W0 not in world.pods


def test_the_shared_budget_stops_the_non_master_and_never_recreates_it() -> None:
    world = World(workers(2, "OnFailure", runPolicy={"backoffLimit": 1}))
    world.settle()
    world.crash(W1, 1)
    world.crash(W0, 1)  # both wait for the kubelet; one unit: the master's
    result = world.step()
    pods = sorted((a.verb, a.name) for a in result.actions if a.kind == "Pod")
    assert pods == [("delete", W1), ("keep", W0)]  # worker-0's log kept, its pod left to restart
    assert [e.reason for e in result.events][:1] == ["BackoffLimitExceeded"]
    entry = replica_status(result.status, W1)
    assert (entry["phase"], entry["stopped"]) == ("Failed", "BackoffLimitExceeded")
    failure = condition(result.status, "ReplicaFailure")
    assert failure["status"] == "True" and f"pod {W1} failed with exit code 1" in failure["message"]
    assert result.status["phase"] == "Running"
    world.tick(10)
    world.restart_in_place(W0)
    for _ in range(3):  # worker-1's pod is gone and stays gone
        result = world.step()
        assert [a for a in result.actions if a.kind == "Pod" and a.name == W1] == []
    assert replica_status(result.status, W1)["phase"] == "Failed"
    assert result.status["backoffCount"] == 1
    assert condition(result.status, "ReplicaFailure")["status"] == "True"
    world.crash(W0, 0)
    assert world.step().status["phase"] == "Succeeded"


def test_a_kubelet_restart_beyond_the_budget_is_counted_and_stops_the_pod() -> None:
    """The kubelet's first restart is immediate: with the last unit taken by another replica
    meanwhile, the controller sees the restart only after it happened."""
    world = World(with_policy(tf(replica("chief"), replica("worker", 2)), worker="OnFailure"))
    world.job["spec"]["runPolicy"] = {"backoffLimit": 1}
    world.settle()
    world.crash(W0, 1)
    world.restart_in_place(W0)
    world.crash(W1, 1)
    world.restart_in_place(W1)  # both restarted before the controller looked
    result = world.step()
    assert sorted((a.verb, a.name) for a in result.actions if a.kind == "Pod") == [
        ("delete", W1),
        ("keep", W0),
    ]
    assert result.status["backoffCount"] == 2  # what the pods show, over the limit of 1
    assert replica_status(result.status, W1)["stopped"] == "BackoffLimitExceeded"


def test_exit_code_recreates_the_pod_and_keeps_the_ended_runs_log_first() -> None:
    world = World(workers(1, "ExitCode", runPolicy={"backoffLimit": 3}))
    world.settle()
    uid = world.pods[W0]["metadata"]["uid"]
    assert world.pods[W0]["spec"]["restartPolicy"] == "Never"
    world.exit(W0, 137)
    world.tick(5)
    result = world.step()
    (delete,) = [a for a in result.actions if a.kind == "Pod"]
    assert (delete.verb, delete.uid) == ("delete", uid)
    assert delete.keep_log == at.LogKeep(
        pod=W0,
        container="tensorflow",
        previous=False,
        config_map="mnist-attempts",
        key="worker-0.0.log",
        max_bytes=16 * 1024,
    )
    world.step()
    new = world.pods[W0]
    assert new["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    world.run(W0)
    entry = replica_status(world.step().status, W0)
    assert entry["attempts"] == [
        {
            "attempt": 0,
            "exitCode": 137,
            "finishedAt": "2024-01-01T12:00:00Z",
            "podUID": uid,
            "keptLog": {"configMap": "mnist-attempts", "key": "worker-0.0.log"},
        }
    ]


def test_each_replica_keeps_its_newest_five_logs() -> None:
    world = World(workers(1, "ExitCode"))
    world.settle()
    kept = []
    for _ in range(7):
        world.exit(W0, 137)
        world.tick(600)
        result = world.step()
        kept.append(next(a.keep_log for a in result.actions if a.keep_log))
        world.step()
        world.run(W0)
    assert [k.drop for k in kept] == [(), (), (), (), (), ("worker-0.0.log",), ("worker-0.1.log",)]
    entry = replica_status(world.step().status, W0)
    with_logs = [a["attempt"] for a in entry["attempts"] if "keptLog" in a]
    assert with_logs == [2, 3, 4, 5, 6]


def test_a_finished_job_stops_a_crash_looping_replica_whatever_its_clean_up_policy() -> None:
    job = with_policy(tf(replica("chief"), replica("worker", 1)), worker="Always")
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "None"}
    world = World(job)
    world.settle()
    world.crash(W0, 0)  # Always: the kubelet will run it again
    world.exit("mnist-chief-0", 0)
    result = world.step()
    assert result.status["phase"] == "Succeeded"
    assert [(a.verb, a.name) for a in result.actions if a.kind == "Pod"] == [("delete", W0)]
    entry = replica_status(result.status, W0)
    assert (entry["phase"], entry["stopped"]) == ("Succeeded", "JobEnded")  # it exited 0
    assert condition(result.status, "ReplicaFailure")["status"] == "False"


def test_a_replica_the_kubelet_restarts_after_the_job_ended_is_stopped() -> None:
    job = with_policy(tf(replica("chief"), replica("worker", 1)), worker="Always")
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "None"}
    world = World(job)
    world.settle()
    world.exit("mnist-chief-0", 0)
    assert world.step().status["phase"] == "Succeeded"  # the worker runs on (None keeps it)
    assert W0 in world.pods
    world.crash(W0, 1)
    world.restart_in_place(W0)  # the kubelet's first restart: at once
    result = world.step()
    assert [(a.verb, a.name) for a in result.actions if a.kind == "Pod"] == [("delete", W0)]
    entry = replica_status(result.status, W0)
    assert (entry["phase"], entry["stopped"]) == ("Failed", "JobEnded")
    assert condition(result.status, "ReplicaFailure")["status"] == "True"
    assert result.status["phase"] == "Succeeded"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"state": {"running": {}}, "restartCount": 0}, []),
        (
            {
                "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": 1}},
                "restartCount": 2,
            },
            [(4, True)],  # A = 3, k = 2: run 5 runs, lastState is run 4
        ),
        (
            {
                "state": {"waiting": {}},
                "lastState": {"terminated": {"exitCode": 1}},
                "restartCount": 2,
            },
            [(5, True)],  # a waiting container's lastState is its latest run
        ),
        (
            {
                "state": {"terminated": {"exitCode": 0}},
                "lastState": {"terminated": {"exitCode": 1}},
                "restartCount": 2,
            },
            [(4, True), (5, False)],
        ),
    ],
)
def test_the_runs_a_pod_shows_are_numbered_by_the_replicas_restarts(
    status: dict[str, Any], expected: list[tuple[int, bool]]
) -> None:
    pod = {
        "metadata": {"annotations": {"batch.tensorstack.dev/restart-count": "3"}},
        "status": {"containerStatuses": [{"name": "tensorflow", **status}]},
    }
    assert [(n, prev) for n, _, prev in at.ended_runs(pod, "tensorflow")] == expected


@pytest.mark.parametrize(
    ("data", "limit", "expected"),
    [
        (b"a\nb\n", 10, "a\nb\n"),
        (b"line one\nline two\n", 12, "line two\n"),  # cut at a line start
        (b"0123456789", 4, "6789"),  # one long line: its end
        (b"ok \xff\n", 10, "ok \ufffd\n"),  # not UTF-8: replaced, never an error
    ],
)
def test_a_kept_log_is_the_tail_from_a_line_start(data: bytes, limit: int, expected: str) -> None:
    assert at.tail(data, limit) == expected


@pytest.mark.parametrize(
    ("replicas", "size"), [(1, 16 * 1024), (9, 16 * 1024), (20, 7864), (1000, 1024)]
)
def test_the_kept_logs_of_a_job_fit_one_config_map(replicas: int, size: int) -> None:
    assert at.tail_bytes(replicas) == size
    assert replicas * at.KEPT_PER_REPLICA * min(size, at.TAIL_MAX) <= max(
        at.LOG_BUDGET, replicas * at.KEPT_PER_REPLICA * at.TAIL_MIN
    )


def test_a_run_first_seen_as_previous_when_the_job_ends_is_still_kept() -> None:
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 3}))
    world.settle()
    world.crash(W0, 1)
    world.restart_in_place(W0)  # restarted before the controller looked...
    world.crash(W0, 0)  # ...and succeeded too
    result = world.step()
    assert result.status["phase"] == "Succeeded"
    assert verbs(result) == [("keep", "Pod", W0)]
    keep = result.actions[0].keep_log
    assert keep is not None and (keep.previous, keep.key) == (True, "worker-0.0.log")
    entry = replica_status(result.status, W0)
    assert [(a["attempt"], a["exitCode"]) for a in entry["attempts"]] == [(0, 1), (1, 0)]
    assert entry["restartCount"] == 1 == result.status["backoffCount"]
    assert world.step().actions == ()  # kept once


def test_an_evicted_in_place_pod_is_recreated_with_its_kubelet_restarts_counted() -> None:
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 5}))
    world.settle()
    _fail_in_place(world, W0, 1)
    world.step()
    world.pods[W0]["status"]["phase"] = "Failed"  # evicted: the kubelet will not restart it
    world.pods[W0]["status"]["reason"] = "Evicted"
    world.tick(10)
    result = world.step()
    assert ("delete", "Pod", W0) in verbs(result)
    assert replica_status(result.status, W0)["restartCount"] == 2  # the kubelet's 1 + this one
    world.step()
    annotations = world.pods[W0]["metadata"]["annotations"]
    assert annotations["batch.tensorstack.dev/restart-count"] == "2"
    assert world.pods[W0]["spec"]["restartPolicy"] == "OnFailure"


def test_a_lost_status_learns_the_kubelets_restarts_back_from_the_pod() -> None:
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 5}))
    world.settle()
    for _ in range(2):
        _fail_in_place(world, W0, 1)
        world.step()
    world.job["status"] = {}  # rolled back (a restore, another writer)
    result = world.step()
    assert replica_status(result.status, W0)["restartCount"] == 2
    assert result.status["backoffCount"] == 2


def test_a_node_shutdown_restart_in_place_is_not_counted_and_the_pod_is_recreated() -> None:
    """`trainops up` stopped: the node ends the pod's containers (143) and marks the pod
    disrupted; started again, its kubelet restarts them in place. Not the replica's failure."""
    world = World(workers(1, "OnFailure", runPolicy={"backoffLimit": 5}))
    world.settle()
    _fail_in_place(world, W0, 1)
    world.step()  # one restart of its own: counted
    world.crash(W0, 143)
    world.pods[W0]["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    ]
    world.restart_in_place(W0)
    result = world.step()
    assert ("delete", "Pod", W0) in verbs(result)
    assert [e.reason for e in result.events] == ["ReplicaRecreated"]
    assert replica_status(result.status, W0)["restartCount"] == 1 == result.status["backoffCount"]
    world.step()
    annotations = world.pods[W0]["metadata"]["annotations"]
    assert annotations["batch.tensorstack.dev/restart-count"] == "1"
