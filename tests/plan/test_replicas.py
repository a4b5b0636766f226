"""Replica pods and services: names, labels, owners, ports, env, overrides and scheduler."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller import labels as L
from tests.plan.builders import T0, World, tf, workers, xgb
from tests.support.jobs import container, replica


def bodies(job: dict[str, Any], kind: str = "Pod") -> dict[str, dict[str, Any]]:
    result = World(job).plan(T0)
    return {a.name: a.body for a in result.actions if a.kind == kind and a.body}


def env_of(pod: dict[str, Any], main: str = "tensorflow") -> dict[str, Any]:
    c = next(c for c in pod["spec"]["containers"] if c["name"] == main)
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def main_container(pod: dict[str, Any], main: str = "tensorflow") -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == main)


def test_every_replica_gets_a_pod_and_a_headless_service_named_job_type_index() -> None:
    result = World(tf()).plan(T0)
    names = ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    assert sorted(a.name for a in result.actions if a.kind == "Pod") == names
    assert sorted(a.name for a in result.actions if a.kind == "Service") == names
    for svc in bodies(tf(), "Service").values():
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["metadata"]["namespace"] == "demo"


LABELS = {
    "the chief is the master": ("mnist-chief-0", "chief", "0", True),
    "a worker is not the master when there is a chief": ("mnist-worker-1", "worker", "1", False),
}


@pytest.mark.parametrize(("name", "rtype", "index", "master"), LABELS.values(), ids=LABELS)
@pytest.mark.parametrize("kind", ["Pod", "Service"])
def test_pods_and_services_carry_the_replica_labels(
    kind: str, name: str, rtype: str, index: str, master: bool
) -> None:
    meta = bodies(tf(), kind)[name]["metadata"]
    assert meta["labels"][L.JOB_NAME] == "mnist"
    assert meta["labels"][L.JOB_KIND] == "TensorFlowTrainingJob"
    assert meta["labels"][L.REPLICA_TYPE] == rtype
    assert meta["labels"][L.REPLICA_INDEX] == index
    assert meta["labels"][L.MANAGED_BY] == "trainops"
    assert (meta["labels"].get(L.JOB_ROLE) == "master") is master
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "TensorFlowTrainingJob",
            "name": "mnist",
            "uid": "job-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_worker_0_is_the_master_without_a_chief() -> None:
    pods = bodies(workers(2))
    assert pods["mnist-worker-0"]["metadata"]["labels"][L.JOB_ROLE] == "master"
    assert L.JOB_ROLE not in pods["mnist-worker-1"]["metadata"]["labels"]


def test_the_xgboost_master_is_master_0() -> None:
    pods = bodies(xgb())
    assert pods["boost-master-0"]["metadata"]["labels"][L.JOB_ROLE] == "master"
    assert L.JOB_ROLE not in pods["boost-worker-0"]["metadata"]["labels"]


def test_the_service_selects_its_one_pod_on_the_main_containers_named_port() -> None:
    job = tf(
        replica(
            "worker",
            1,
            containers=[container(ports=[{"name": "tfjob-port", "containerPort": 3333}])],
        )
    )
    svc = bodies(job, "Service")["mnist-worker-0"]
    assert svc["spec"]["selector"] == {
        L.JOB_NAME: "mnist",
        L.REPLICA_TYPE: "worker",
        L.REPLICA_INDEX: "0",
    }
    assert svc["spec"]["ports"] == [{"name": "tfjob-port", "port": 3333, "targetPort": 3333}]


def test_the_pod_keeps_its_template_but_the_replicas_restart_policy_overrides_its_own() -> None:
    rep = replica("worker", 1, restartPolicy="OnFailure")
    rep["template"]["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "x"}}
    rep["template"]["spec"]["restartPolicy"] = "Always"
    rep["template"]["spec"]["nodeSelector"] = {"gpu": "yes"}
    pod = bodies(tf(rep))["mnist-worker-0"]
    assert pod["spec"]["restartPolicy"] == "OnFailure"  # restarted in place by the kubelet
    assert pod["spec"]["nodeSelector"] == {"gpu": "yes"}
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["metadata"]["annotations"] == {"note": "x", L.RESTART_COUNT: "0"}
    assert "hostname" not in pod["spec"]


def test_tf_config_lists_every_type_with_its_service_addresses_evaluator_included() -> None:
    job = tf(replica("chief"), replica("worker", 2), replica("ps"), replica("evaluator"))
    pods = bodies(job)
    config = json.loads(env_of(pods["mnist-worker-1"])["TF_CONFIG"])
    assert config == {
        "cluster": {
            "chief": ["mnist-chief-0.demo.svc:2222"],
            "worker": ["mnist-worker-0.demo.svc:2222", "mnist-worker-1.demo.svc:2222"],
            "ps": ["mnist-ps-0.demo.svc:2222"],
            "evaluator": ["mnist-evaluator-0.demo.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    evaluator = json.loads(env_of(pods["mnist-evaluator-0"])["TF_CONFIG"])
    assert evaluator["task"] == {"type": "evaluator", "index": 0}


def test_the_users_env_comes_first_and_wins_over_ours() -> None:
    mine = [{"name": "A", "value": "1"}, {"name": "TF_CONFIG", "value": "mine"}]
    job = tf(replica("worker", 1, containers=[container(env=mine)]))
    env = main_container(bodies(job)["mnist-worker-0"])["env"]
    assert env == mine


def test_our_env_is_appended_after_the_users() -> None:
    job = tf(replica("worker", 1, containers=[container(env=[{"name": "A", "value": "1"}])]))
    env = main_container(bodies(job)["mnist-worker-0"])["env"]
    assert [e["name"] for e in env] == ["A", "TF_CONFIG"]


XGB_ENV = {
    "the master has rank 0": (
        "boost-master-0",
        {"RANK": "0"},
    ),
    "worker i has rank i+1": ("boost-worker-1", {"RANK": "2"}),
}


@pytest.mark.parametrize(("name", "expected"), XGB_ENV.values(), ids=XGB_ENV)
def test_xgboost_replicas_learn_the_master_and_the_workers(
    name: str, expected: dict[str, str]
) -> None:
    env = env_of(bodies(xgb(workers=2))[name], "xgboost")
    assert env == {
        "MASTER_ADDR": "boost-master-0",
        "MASTER_PORT": "9999",
        "WORLD_SIZE": "3",
        "WORKER_PORT": "9999",
        "WORKER_ADDRS": "boost-worker-0,boost-worker-1",
        "PYTHONUNBUFFERED": "1",
        **expected,
    }


def test_the_t9k_scheduler_gets_its_queue_and_priority() -> None:
    job = tf(scheduler={"t9kScheduler": {"queue": "default", "priority": 50}})
    pod = bodies(job)["mnist-chief-0"]
    assert pod["spec"]["schedulerName"] == "t9k-scheduler"
    assert pod["metadata"]["labels"][L.QUEUE] == "default"
    assert pod["metadata"]["annotations"][L.PRIORITY] == "50"


def test_without_a_scheduler_the_templates_scheduler_name_is_kept() -> None:
    rep = replica("worker", 1)
    rep["template"]["spec"]["schedulerName"] = "volcano"
    pod = bodies(tf(rep))["mnist-worker-0"]
    assert pod["spec"]["schedulerName"] == "volcano"
    assert L.QUEUE not in pod["metadata"]["labels"]


def init_job(**spec: Any) -> dict[str, Any]:
    rep = replica("worker", 1, containers=[container(command=["python", "t.py"], args=["--x"])])
    rep["template"]["spec"]["initContainers"] = [container("init", "busybox")]
    return tf(rep, **spec)


DEBUG = {
    "debug defaults to sleep inf and keeps init containers": (
        {"enabled": True},
        ["sleep", "inf"],
        True,
    ),
    "a type's debug command replaces the command and drops the init containers": (
        {
            "enabled": True,
            "replicaSpecs": [
                {"type": "worker", "command": ["/usr/bin/sshd"], "skipInitContainer": True}
            ],
        },
        ["/usr/bin/sshd"],
        False,
    ),
}


@pytest.mark.parametrize(("debug", "command", "init"), DEBUG.values(), ids=DEBUG)
def test_debug_mode_replaces_the_main_command(
    debug: dict[str, Any], command: list[str], init: bool
) -> None:
    pod = bodies(init_job(runMode={"debug": debug}))["mnist-worker-0"]
    main = main_container(pod)
    assert main["command"] == command
    assert "args" not in main
    assert ("initContainers" in pod["spec"]) is init


def test_a_job_that_was_never_paused_runs_the_templates_command() -> None:
    job = init_job(
        runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["x"]}]}}
    )
    main = main_container(bodies(job)["mnist-worker-0"])
    assert (main["command"], main["args"]) == (["python", "t.py"], ["--x"])
