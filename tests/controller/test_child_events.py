"""Which child events reconcile their job at once, and which wait to share one reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from controller.manager import CHILD_BATCH_SECONDS, child_event_delay


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
