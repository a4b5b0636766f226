"""The TensorBoard: Deployment and Service bodies, `status.tensorboard`, removal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.plan import Plan
from tests.plan.builders import World, workers

SPEC = {
    "image": "t9kpublic/tensorboard:2.11.0",
    "trainingLogFilesets": ["t9k://pvc/logs/run1", "t9k://pvc/logs/run2", "t9k://pvc/other"],
}


def test_a_tensorboard_spec_creates_a_deployment_and_a_service() -> None:
    world = World(
        workers(1, tensorboardSpec={**SPEC, "trainingLogFilesets": ["t9k://pvc/logs/run1"]})
    )
    result = world.step()
    tb = {a.kind: a.body for a in result.actions if a.name == "mnist-tensorboard"}
    assert set(tb) == {"Deployment", "Service"}
    deployment = tb["Deployment"]
    assert (
        deployment is not None and deployment["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    )
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "tensorboard" and container["image"] == SPEC["image"]
    assert container["command"] + container["args"] == [
        "tensorboard",
        "--logdir=/t9k/pvc/logs/run1",
        "--bind_all",
        "--port=6006",
    ]
    assert container["volumeMounts"] == [
        {"name": "pvc-0", "mountPath": "/t9k/pvc/logs", "readOnly": True}
    ]
    assert pod["volumes"] == [
        {"name": "pvc-0", "persistentVolumeClaim": {"claimName": "logs", "readOnly": True}}
    ]
    assert tb["Service"] is not None and tb["Service"]["spec"]["ports"][0]["port"] == 6006
    status = result.status["tensorboard"]
    assert (status["action"], status["ready"], status["reason"]) == (
        "CREATE",
        False,
        "DependentCreating",
    )


def test_several_filesets_mount_each_pvc_once_and_use_a_logdir_spec() -> None:
    world = World(workers(1, tensorboardSpec=SPEC))
    deployment = next(a.body for a in world.step().actions if a.kind == "Deployment")
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == (
        "--logdir_spec=logs/run1:/t9k/pvc/logs/run1,logs/run2:/t9k/pvc/logs/run2,other:/t9k/pvc/other"
    )
    assert [m["mountPath"] for m in container["volumeMounts"]] == [
        "/t9k/pvc/logs",
        "/t9k/pvc/other",
    ]


def test_the_tensorboard_status_follows_the_deployment_and_removal_deletes_it() -> None:
    job = workers(1, tensorboardSpec=SPEC)
    world = World(job)
    world.settle()
    assert world.deployment is not None
    status = world.step().status["tensorboard"]
    assert (status["action"], status["ready"], status["reason"]) == (
        "NOP",
        False,
        "DependentNotReady",
    )
    world.deployment["status"] = {"availableReplicas": 1}
    status = world.step().status["tensorboard"]
    assert status == {
        "action": "NOP",
        "dependent": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "mnist-tensorboard",
            "namespace": "demo",
            "uid": world.deployment["metadata"]["uid"],
        },
        "note": "TensorBoard [mnist-tensorboard] is ready",
        "ready": True,
        "reason": "DependentReady",
        "type": "Normal",
    }
    del job["spec"]["tensorboardSpec"]
    removing = world.step()
    assert sorted((a.verb, a.kind) for a in removing.actions) == [
        ("delete", "Deployment"),
        ("delete", "Service"),
    ]
    assert world.deployment is None
    assert "tensorboard" not in world.step().status


def _deployment_actions(result: Plan) -> list[tuple[str, str]]:
    return [(a.verb, a.kind) for a in result.actions if a.name == "mnist-tensorboard"]


def _container(world: World) -> dict[str, Any]:
    assert world.deployment is not None
    container: dict[str, Any] = world.deployment["spec"]["template"]["spec"]["containers"][0]
    return container


# name -> the new tensorboardSpec, and what the TensorBoard container must then say
CHANGES: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], Any], Any]] = {
    "image": (
        {**SPEC, "image": "t9kpublic/tensorboard:2.12.0"},
        lambda c: c["image"],
        "t9kpublic/tensorboard:2.12.0",
    ),
    "log paths": (
        {**SPEC, "trainingLogFilesets": ["t9k://pvc/fresh/run9"]},
        lambda c: (c["args"][0], [m["mountPath"] for m in c["volumeMounts"]]),
        ("--logdir=/t9k/pvc/fresh/run9", ["/t9k/pvc/fresh"]),
    ),
    "resources": (
        {**SPEC, "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
        lambda c: c["resources"],
        {"limits": {"cpu": "1", "memory": "1Gi"}},
    ),
}


@pytest.mark.parametrize(("spec", "read", "expected"), CHANGES.values(), ids=CHANGES.keys())
def test_a_changed_tensorboard_spec_updates_the_deployment_in_place(
    spec: dict[str, Any], read: Callable[[dict[str, Any]], Any], expected: Any
) -> None:
    job = workers(1, tensorboardSpec=SPEC)
    world = World(job)
    world.settle()
    assert world.deployment is not None
    uid = world.deployment["metadata"]["uid"]
    assert _deployment_actions(world.step()) == []  # unchanged: nothing to do

    job["spec"]["tensorboardSpec"] = spec
    result = world.step()
    assert _deployment_actions(result) == [("update", "Deployment")]
    (update,) = [a for a in result.actions if a.verb == "update"]
    assert update.uid == uid and update.body is not None
    assert update.body["metadata"]["uid"] == uid  # a PUT guarded by the uid
    assert read(_container(world)) == expected
    status = result.status["tensorboard"]
    assert (status["action"], status["reason"]) == ("UPDATE", "DependentUpdating")
    assert [e.reason for e in result.events if e.reason.startswith("TensorBoard")] == [
        "TensorBoardUpdated"
    ]

    # Updated: the next round has nothing to do, and the same Deployment (uid) remains.
    after = world.step()
    assert _deployment_actions(after) == []
    assert after.status["tensorboard"]["action"] == "NOP"
    assert world.deployment is not None and world.deployment["metadata"]["uid"] == uid


def test_a_deployment_made_before_the_spec_hash_is_updated_once_to_carry_it() -> None:
    world = World(workers(1, tensorboardSpec=SPEC))
    world.settle()
    assert world.deployment is not None
    del world.deployment["metadata"]["annotations"]
    assert _deployment_actions(world.step()) == [("update", "Deployment")]
    assert _deployment_actions(world.step()) == []


def test_server_defaults_on_the_stored_deployment_are_not_a_change() -> None:
    world = World(workers(1, tensorboardSpec=SPEC))
    world.settle()
    assert world.deployment is not None
    world.deployment["spec"]["strategy"] = {"type": "RollingUpdate"}
    world.deployment["spec"]["revisionHistoryLimit"] = 10
    _container(world)["terminationMessagePath"] = "/dev/termination-log"
    assert _deployment_actions(world.step()) == []


def test_a_deployment_being_deleted_is_not_updated() -> None:
    job = workers(1, tensorboardSpec=SPEC)
    world = World(job)
    world.settle()
    assert world.deployment is not None
    world.deployment["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    job["spec"]["tensorboardSpec"] = {**SPEC, "image": "tb:other"}
    assert _deployment_actions(world.step()) == []
