"""Which child events reconcile their job at once, and which wait to share one reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from controller.manager import (
    CHILD_BATCH_SECONDS,
    Controller,
    ControllerSettings,
    child_event_delay,
)
from controller.reconciler import job_key
from kube.client import Client
from kube.manager import LeaderElection, Manager


def pod(phase: str | None, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j-worker-0", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T15:00:00Z"
    return {"metadata": meta, "status": {"phase": phase} if phase else {}}


CASES = [
    # (what, kind, event, object, waits)
    ("a pod just created", "Pod", "ADDED", pod(None), True),
    ("a pod Pending", "Pod", "MODIFIED", pod("Pending"), True),
    ("a pod Running", "Pod", "MODIFIED", pod("Running"), True),
    (
        "a pod Succeeded (a chief's exit decides the job)",
        "Pod",
        "MODIFIED",
        pod("Succeeded"),
        False,
    ),
    ("a pod Failed (a restart or the job's failure)", "Pod", "MODIFIED", pod("Failed"), False),
    ("a pod Unknown", "Pod", "MODIFIED", pod("Unknown"), False),
    ("a Running pod being deleted", "Pod", "MODIFIED", pod("Running", deleting=True), False),
    ("a pod deleted", "Pod", "DELETED", pod("Running"), False),
    ("a pod seen again by a relist", "Pod", "ADDED", pod("Succeeded"), False),
    ("a Service created", "Service", "ADDED", {"metadata": {"name": "s"}}, True),
    ("a Service deleted (recreate it)", "Service", "DELETED", {"metadata": {"name": "s"}}, False),
    ("a TensorBoard Deployment changed", "Deployment", "MODIFIED", {"metadata": {}}, False),
]


@pytest.mark.parametrize(
    ("kind", "event", "obj", "waits"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_progress_waits_and_what_decides_a_job_does_not(
    kind: str, event: str, obj: dict[str, Any], waits: bool
) -> None:
    assert child_event_delay(kind, event, obj) == (CHILD_BATCH_SECONDS if waits else 0.0)


def test_the_wait_is_short_beside_what_a_user_waits_for() -> None:
    # kube-controller-manager's Job controller batches its pods' events for 1 s.
    assert 0 < CHILD_BATCH_SECONDS <= 1.0


def owned_pod(job: str, phase: str) -> dict[str, Any]:
    obj = pod(phase)
    ref = {"kind": "TensorFlowTrainingJob", "name": job, "uid": "u", "controller": True}
    obj["metadata"]["ownerReferences"] = [ref]
    return obj


async def test_a_decisive_child_event_queues_its_job_ahead_of_the_jobs_queued_before(
    kclient: Client,
) -> None:
    """A chief's exit must not wait behind every job queued before it (a backlog of progress
    and first sights under load): its job goes in the queue's urgent lane; progress waits."""
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    controller = Controller(manager, ControllerSettings())  # not started: its queue only fills
    on_pod = controller._on_child("Pod")
    for name in ("a", "b"):
        controller.queue.add(job_key("TensorFlowTrainingJob", "ns", name))
    on_pod("MODIFIED", owned_pod("running", "Running"), None)
    on_pod("MODIFIED", owned_pod("done", "Succeeded"), None)
    on_pod("MODIFIED", owned_pod("b", "Failed"), None)  # queued already: moves up

    assert len(controller.queue) == 3  # the Running pod's job waits CHILD_BATCH_SECONDS
    order = [await controller.queue.get() for _ in range(3)]
    assert order == [job_key("TensorFlowTrainingJob", "ns", n) for n in ("done", "b", "a")]
    controller.queue.shut_down()
