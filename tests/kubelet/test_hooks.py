"""activeDeadlineSeconds counts from startTime and stops counting once the pod finished."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from localcluster.kubelet.hooks import deadline_left

NOW = datetime(2026, 1, 1, 0, 1, 0, tzinfo=UTC)
STARTED = {"startTime": "2026-01-01T00:00:00Z", "phase": "Running"}

CASES = {
    "no deadline": ({}, STARTED, None),
    "not started yet": ({"activeDeadlineSeconds": 30}, {}, None),
    "time left": ({"activeDeadlineSeconds": 90}, STARTED, 30.0),
    "exceeded": ({"activeDeadlineSeconds": 45}, STARTED, -15.0),
    "finished pods have no deadline": (
        {"activeDeadlineSeconds": 45},
        {**STARTED, "phase": "Succeeded"},
        None,
    ),
}


@pytest.mark.parametrize(("spec", "status", "want"), CASES.values(), ids=CASES.keys())
def test_deadline_left(spec: dict, status: dict, want: float | None) -> None:
    assert deadline_left(spec, status, NOW) == want
