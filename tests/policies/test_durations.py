"""One spelling of a duration for every printer: kubectl's (apimachinery's HumanDuration) — the
AGE columns, the ETA in a job's status and `kubectl get`, the dashboard's deadlines and ages."""

from __future__ import annotations

import pytest

from policies.durations import human_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (-1, "0s"),
        (-5, "<invalid>"),
        (59.4, "59s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (600, "10m"),
        (3600, "60m"),
        (7500, "125m"),
        (3 * 3600 + 60, "3h1m"),
        (9 * 3600, "9h"),
        (86400 + 4 * 3600, "28h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (30 * 86400, "30d"),
    ],
)
def test_durations_are_spelled_as_kubectl_does(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text
