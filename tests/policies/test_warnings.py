"""Warnings: non-fatal findings, each one line shorter than 120 characters (HTTP Warning)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import policies
from tests.support.jobs import container, replica, tf_job, xgb_job

Job = dict[str, Any]

# name -> (job, expected warnings, as substrings, in order)
WARNINGS: dict[str, tuple[Callable[[], Job], list[str]]] = {
    "a job with limits on every main container gets no warning": (tf_job, []),
    "a main container without limits is warned about": (
        lambda: tf_job(replica("chief", containers=[container()])),
        ['spec.replicaSpecs[0]: container "tensorflow" sets no resource limits'],
    ),
    "an XGBoost main container without limits is warned about": (
        lambda: xgb_job(replica("master", containers=[container("xgboost")])),
        ['spec.replicaSpecs[0]: container "xgboost" sets no resource limits'],
    ),
    "a pod-level restart policy is ignored, and said so": (
        lambda: tf_job(
            {
                "type": "chief",
                "template": {
                    "spec": {
                        "restartPolicy": "Always",
                        "containers": [container(limits={"cpu": 1})],
                    }
                },
            }
        ),
        ["spec.replicaSpecs[0].template.spec.restartPolicy is ignored"],
    ),
    "parameter servers left running by clean-up policy None are warned about": (
        lambda: tf_job(replica("worker", 2), replica("ps", 2), runPolicy={"cleanUpPolicy": "None"}),
        ["spec.runPolicy.cleanUpPolicy None: parameter servers keep running"],
    ),
    "clean-up policy None without parameter servers is not worth a warning": (
        lambda: tf_job(runPolicy={"cleanUpPolicy": "None"}),
        [],
    ),
    "debug mode is announced": (
        lambda: tf_job(runMode={"debug": {"enabled": True}}),
        ["spec.runMode.debug.enabled: debug mode is on"],
    ),
    "a paused job is announced": (
        lambda: tf_job(runMode={"pause": {"enabled": True}}),
        ["spec.runMode.pause.enabled: the job is paused"],
    ),
    "a hundred thousand replicas are warned about": (
        lambda: tf_job(replica("worker", 100_000)),
        ["spec.replicaSpecs[0].replicas: 100000 replicas make 100000 pods and Services"],
    ),
    "a thousand replicas are not": (lambda: tf_job(replica("worker", 1000)), []),
    "disabled modes are not announced": (
        lambda: tf_job(runMode={"debug": {"enabled": False}, "pause": {"enabled": False}}),
        [],
    ),
}


@pytest.mark.parametrize(("build", "expected"), list(WARNINGS.values()), ids=list(WARNINGS))
def test_non_fatal_findings_are_warned_about(build: Callable[[], Job], expected: list[str]) -> None:
    admission = policies.admit(build())
    assert admission.allowed
    assert len(admission.warnings) == len(expected)
    for text, fragment in zip(admission.warnings, expected, strict=True):
        assert fragment in text
        assert len(text) < 120


def test_every_warning_fits_an_http_warning_header() -> None:
    no_limits = [container()]
    job = tf_job(
        *(replica(t, containers=no_limits) for t in ("chief", "worker", "ps", "evaluator")),
        runMode={"debug": {"enabled": True}, "pause": {"enabled": True}},
    )
    warnings = policies.admit(job).warnings
    assert len(warnings) == 6
    assert all(len(w) < 120 and "\n" not in w for w in warnings)
