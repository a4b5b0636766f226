"""The local scheduler binds the pods of `default-scheduler` and `t9k-scheduler` (on the one
node it stands in for the T9k Scheduler), and leaves pods naming any other scheduler alone."""

from __future__ import annotations

import pytest

from localcluster.controllers.scheduler import SCHEDULER_NAMES, wants_binding
from tests.kubelet.conftest import eventually
from tests.kubelet.test_pods import make_pod, phase_is, raw_pod, shell


def _pod(scheduler: str | None = None, **spec: object) -> dict:
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], **spec}}


@pytest.mark.parametrize("scheduler", [None, "", "default-scheduler", "t9k-scheduler"])
def test_pods_of_the_default_and_the_t9k_scheduler_are_bound(scheduler: str | None) -> None:
    assert wants_binding(_pod(scheduler))


def test_pods_of_another_scheduler_are_left_alone() -> None:
    assert not wants_binding(_pod("volcano"))
    assert {"default-scheduler", "t9k-scheduler"} == SCHEDULER_NAMES


def test_the_set_of_scheduler_names_is_a_parameter() -> None:
    assert wants_binding(_pod("volcano"), {"volcano"})
    assert not wants_binding(_pod("t9k-scheduler"), {"default-scheduler"})
    assert not wants_binding(_pod(), {"t9k-scheduler"})


def test_bound_deleted_or_finished_pods_are_not_bound_again() -> None:
    assert not wants_binding(_pod("t9k-scheduler", nodeName="trainops"))
    deleted = _pod()
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not wants_binding(deleted)
    assert not wants_binding({**_pod(), "status": {"phase": "Succeeded"}})


def test_a_pod_of_the_t9k_scheduler_runs_on_the_local_node(core, namespace) -> None:
    make_pod(
        core,
        namespace,
        "t9k",
        [shell("main", "echo scheduled")],
        restartPolicy="Never",
        schedulerName="t9k-scheduler",
    )
    pod = eventually(lambda: phase_is(core, namespace, "t9k", "Succeeded"))
    assert pod["spec"]["nodeName"] == "trainops"


def test_a_pod_of_another_scheduler_stays_pending(core, namespace) -> None:
    make_pod(
        core, namespace, "other", [shell("main", "true")], restartPolicy="Never", schedulerName="x"
    )
    make_pod(core, namespace, "marker", [shell("main", "true")], restartPolicy="Never")
    eventually(lambda: phase_is(core, namespace, "marker", "Succeeded"))
    pod = raw_pod(core, namespace, "other")
    assert not pod["spec"].get("nodeName")
    assert pod.get("status", {}).get("phase") == "Pending"
