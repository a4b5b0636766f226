"""A deadline shortened while the job runs waits DEADLINE_SETTLE seconds before it ends the job,
so an edit that GitOps self-heal reverts within a second does not fail the job for good
(issue 16, item 3). The time of the edit is the newest managedFields entry owning
`spec.runPolicy.activeDeadlineSeconds`."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest

from controller.lifecycle import DEADLINE_SETTLE, deadline_settle_left
from kube.resources import cached_training_job
from tests.plan.builders import T0, World, at, condition, stamp, workers

OWNS_DEADLINE = {"f:spec": {"f:runPolicy": {"f:activeDeadlineSeconds": {}}}}
OWNS_OTHER = {"f:spec": {"f:runPolicy": {"f:backoffLimit": {}}}}


def entry(
    manager: str, moment: datetime, fields: dict[str, Any], subresource: str = ""
) -> dict[str, Any]:
    out = {"manager": manager, "operation": "Update", "time": stamp(moment), "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


def job_with(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"creationTimestamp": stamp(T0), "managedFields": list(entries)}}


SETTLE = {
    "no managedFields: decide now": (job_with(), 60, 0.0),
    "written at creation: decide now": (job_with(entry("git", T0, OWNS_DEADLINE)), 60, 0.0),
    "edited 3 s ago: wait the rest": (job_with(entry("kubectl-edit", at(57), OWNS_DEADLINE)), 60, 7.0),
    "edited 12 s ago: decide now": (job_with(entry("kubectl-edit", at(48), OWNS_DEADLINE)), 60, 0.0),
    "another field edited: decide now": (job_with(entry("kubectl-edit", at(59), OWNS_OTHER)), 60, 0.0),
    "status writes never count": (
        job_with(entry("ctl", at(59), OWNS_DEADLINE, subresource="status")), 60, 0.0,
    ),
    "the newest owner counts": (
        job_with(entry("git", T0, OWNS_DEADLINE), entry("kubectl", at(58), OWNS_DEADLINE)), 60, 8.0,
    ),
}  # fmt: skip


@pytest.mark.parametrize(("job", "now", "expected"), SETTLE.values(), ids=SETTLE)
def test_a_passed_deadline_waits_only_when_it_was_just_changed(
    job: dict[str, Any], now: int, expected: float
) -> None:
    assert deadline_settle_left(job, at(now)) == expected
    assert DEADLINE_SETTLE == 10.0
    # The shared job cache keeps managedFields only where this reads them: the same answer.
    assert deadline_settle_left(cached_training_job(copy.deepcopy(job)), at(now)) == expected


def test_the_job_cache_keeps_only_the_deadlines_writers_each_with_that_field_alone() -> None:
    big = {"f:spec": {"f:runPolicy": {"f:activeDeadlineSeconds": {}, "f:backoffLimit": {}},
                      "f:replicaSpecs": {}}, "f:metadata": {"f:labels": {}}}  # fmt: skip
    job = job_with(
        entry("git", T0, big),
        entry("kubectl", at(5), OWNS_OTHER),
        entry("ctl", at(6), {"f:status": {"f:phase": {}}}, subresource="status"),
        entry("kubectl-edit", at(9), OWNS_DEADLINE),
    )
    job["spec"] = {"runPolicy": {"activeDeadlineSeconds": 5}}
    cached = cached_training_job(job)
    assert cached["metadata"]["managedFields"] == [
        entry("git", T0, OWNS_DEADLINE),
        entry("kubectl-edit", at(9), OWNS_DEADLINE),
    ]
    assert cached["spec"] == {"runPolicy": {"activeDeadlineSeconds": 5}}
    none = cached_training_job(job_with(entry("kubectl", at(5), OWNS_OTHER)))
    assert "managedFields" not in none["metadata"]
    assert cached_training_job({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}}


def _edit(job: dict[str, Any], seconds: int, moment: datetime, manager: str) -> None:
    job["spec"]["runPolicy"]["activeDeadlineSeconds"] = seconds
    job["metadata"]["managedFields"] = [entry(manager, moment, OWNS_DEADLINE)]


def test_a_shortened_deadline_reverted_within_the_settle_time_does_not_fail_the_job() -> None:
    job = workers(2, runPolicy={"activeDeadlineSeconds": 100})
    job["metadata"]["creationTimestamp"] = stamp(T0)
    world = World(job)
    world.settle(T0)
    world.run()
    _edit(job, 30, at(60), "kubectl-edit")  # by hand: 30 s, already passed
    held = world.step(at(60))
    assert (held.status["phase"], held.requeue_after) == ("Running", 10.0)
    _edit(job, 100, at(61), "trainops-gitops")  # self-heal puts Git's 100 back
    later = world.step(at(70))
    assert (later.status["phase"], later.requeue_after) == ("Running", 30.0)
    assert condition(later.status, "Failed")["status"] == "False"


def test_a_shortened_deadline_that_stands_ends_the_job_after_the_settle_time() -> None:
    job = workers(1, runPolicy={"activeDeadlineSeconds": 100})
    job["metadata"]["creationTimestamp"] = stamp(T0)
    world = World(job)
    world.settle(T0)
    world.run()
    _edit(job, 30, at(60), "kubectl-edit")
    assert world.step(at(65)).requeue_after == 5.0
    ended = world.step(at(70))
    assert ended.status["phase"] == "Failed"
    assert condition(ended.status, "Failed")["reason"] == "DeadlineExceeded"
