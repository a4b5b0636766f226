"""Integers declared `format: int32` / `int64` in the schema must fit, as they would in Go."""

from __future__ import annotations

from typing import Any

import pytest

import policies
from tests.support.jobs import container, replica, tf_job

INT32_MAX = 2**31 - 1

OUT_OF_RANGE = {
    "replicas beyond int32": (
        tf_job(replica("chief"), replica("worker", INT32_MAX + 1)),
        "spec.replicaSpecs[1].replicas",
    ),
    "a container port beyond int32": (
        tf_job(
            replica(
                "chief",
                containers=[container(ports=[{"name": "p", "containerPort": 10**12}])],
            )
        ),
        "spec.replicaSpecs[0].template.spec.containers[0].ports[0].containerPort",
    ),
    "a deadline beyond int64": (
        tf_job(runPolicy={"activeDeadlineSeconds": 2**63}),
        "spec.runPolicy.activeDeadlineSeconds",
    ),
}


@pytest.mark.parametrize(
    ("job", "field"), list(OUT_OF_RANGE.values()), ids=list(OUT_OF_RANGE.keys())
)
def test_an_integer_too_large_for_its_format_is_invalid_naming_the_field(
    job: dict[str, Any], field: str
) -> None:
    admission = policies.admit(job)
    matching = [e for e in admission.errors if e.field == field]
    assert len(matching) == 1, [str(e) for e in admission.errors]
    assert matching[0].type.value == "Invalid"
    assert "-bit integer" in matching[0].message


def test_the_largest_values_that_fit_are_admitted() -> None:
    job = tf_job(
        replica("chief"),
        replica("worker", 3),
        runPolicy={"activeDeadlineSeconds": 2**63 - 1, "backoffLimit": INT32_MAX},
    )
    admission = policies.admit(job)
    assert admission.errors == []
