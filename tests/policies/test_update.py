"""UPDATE rules: what may change on an existing job, and what is frozen (docs/POLICIES.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

import policies
from tests.support.jobs import container, replica, tf_job, xgb_job

Job = dict[str, Any]
RS = "spec.replicaSpecs"


def paused(enabled: bool, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    pause: dict[str, Any] = {"enabled": enabled}
    if resume is not None:
        pause["resumeSpecs"] = resume
    return {"pause": pause}


def labelled(job: Job) -> Job:
    job["metadata"]["labels"] = {"team": "vision"}
    return job


# name -> (old, new, expected {(reason, field)})
UPDATES: dict[str, tuple[Callable[[], Job], Callable[[], Job], set[tuple[str, str]]]] = {
    "an unchanged job may be updated": (tf_job, tf_job, set()),
    "pausing is allowed": (
        lambda: tf_job(runMode=paused(False, [{"type": "worker"}])),
        lambda: tf_job(runMode=paused(True, [{"type": "worker"}])),
        set(),
    ),
    "resuming is allowed": (
        lambda: tf_job(runMode=paused(True)),
        lambda: tf_job(runMode=paused(False)),
        set(),
    ),
    "changing resume specs is forbidden": (
        lambda: tf_job(runMode=paused(True, [{"type": "worker"}])),
        lambda: tf_job(runMode=paused(True, [{"type": "worker", "command": ["sh"]}])),
        {("Forbidden", "spec.runMode.pause.resumeSpecs")},
    ),
    "adding resume specs later is forbidden": (
        lambda: tf_job(),
        lambda: tf_job(runMode=paused(True, [{"type": "chief"}])),
        {("Forbidden", "spec.runMode.pause.resumeSpecs")},
    ),
    "re-casing a resume type is no change": (
        lambda: tf_job(runMode=paused(True, [{"type": "worker"}])),
        lambda: tf_job(runMode=paused(False, [{"type": "Worker"}])),
        set(),
    ),
    "scaling workers is forbidden": (
        lambda: tf_job(replica("chief"), replica("worker", 2)),
        lambda: tf_job(replica("chief"), replica("worker", 4)),
        {("Forbidden", f"{RS}[1].replicas")},
    ),
    "changing a template is forbidden": (
        lambda: tf_job(replica("chief")),
        lambda: tf_job(replica("chief", containers=[container(image="tf:2.12")])),
        {("Forbidden", f"{RS}[0].template")},
    ),
    "changing a restart policy is forbidden": (
        lambda: tf_job(replica("chief", restartPolicy="Never")),
        lambda: tf_job(replica("chief", restartPolicy="OnFailure")),
        {("Forbidden", f"{RS}[0].restartPolicy")},
    ),
    "adding a replica type is forbidden": (
        lambda: tf_job(replica("chief")),
        lambda: tf_job(replica("chief"), replica("ps")),
        {("Forbidden", RS)},
    ),
    "reordering replica types is forbidden": (
        lambda: xgb_job(replica("master", main="xgboost"), replica("worker", main="xgboost")),
        lambda: xgb_job(replica("worker", main="xgboost"), replica("master", main="xgboost")),
        {("Forbidden", RS)},
    ),
    "moving to another queue is forbidden": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "a"}}),
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "b"}}),
        {("Forbidden", "spec.scheduler")},
    ),
    "switching debug mode is forbidden": (
        lambda: tf_job(runMode={"debug": {"enabled": True}}),
        lambda: tf_job(runMode={"debug": {"enabled": False}}),
        {("Forbidden", "spec.runMode.debug")},
    ),
    "run policy may change": (
        lambda: tf_job(runPolicy={"backoffLimit": 1}),
        lambda: tf_job(
            runPolicy={"backoffLimit": 5, "activeDeadlineSeconds": 60, "cleanUpPolicy": "All"}
        ),
        set(),
    ),
    "the TensorBoard may change": (
        lambda: tf_job(tensorboardSpec={"image": "tb:1", "trainingLogFilesets": ["t9k://pvc/a"]}),
        lambda: tf_job(tensorboardSpec={"image": "tb:2", "trainingLogFilesets": ["t9k://pvc/b"]}),
        set(),
    ),
    "metadata may change": (tf_job, lambda: labelled(tf_job()), set()),
    "a job stored before defaulting is compared in defaulted form": (
        lambda: tf_job(replica("Chief", None)),
        lambda: policies.default(tf_job(replica("chief", None)))[0],
        set(),
    ),
    "rules of CREATE still apply on UPDATE": (
        lambda: tf_job(runPolicy={"backoffLimit": 1}),
        lambda: tf_job(runPolicy={"backoffLimit": -1}),
        {("Invalid", "spec.runPolicy.backoffLimit")},
    ),
    "an old object that is not even an object is ignored": (
        lambda: cast(Job, ["junk"]),
        tf_job,
        set(),
    ),
}


@pytest.mark.parametrize(("old", "new", "expected"), list(UPDATES.values()), ids=list(UPDATES))
def test_only_pause_run_policy_tensorboard_and_metadata_may_change(
    old: Callable[[], Job], new: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    admission = policies.admit(new(), old())
    assert {(e.type.value, e.field) for e in admission.errors} == expected


def test_resume_specs_message_says_pause_may_still_be_toggled() -> None:
    old = tf_job(runMode=paused(True, [{"type": "worker"}]))
    new = tf_job(runMode=paused(False, [{"type": "chief"}]))
    [error] = policies.admit(new, old).errors
    assert "spec.runMode.pause.enabled may be toggled freely" in error.message


def test_reordering_types_is_forbidden_with_a_message_saying_what_may_change() -> None:
    old = tf_job(replica("chief"), replica("worker", replicas=2))
    new = tf_job(replica("worker", replicas=2), replica("chief"))
    [error] = policies.admit(new, old).errors
    assert (error.type.value, error.field) == ("Forbidden", "spec.replicaSpecs")
    assert error.detail == (
        "replica types and their order are immutable; only spec.runMode.pause.enabled, "
        "spec.runPolicy, spec.tensorboardSpec may change"
    )
