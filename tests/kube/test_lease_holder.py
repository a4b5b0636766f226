"""`current_holder`: who holds a Lease at an instant, as `trainops up` asks before starting a
controller (an expired or released Lease has no holder: anyone may take it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kube.leader import current_holder

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _lease(holder: str | None, renewed: str | None, duration: int | None = 15) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if holder is not None:
        spec["holderIdentity"] = holder
    if renewed is not None:
        spec["renewTime"] = renewed
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"metadata": {"name": "trainops-controller"}, "spec": spec}


CASES: dict[str, tuple[dict[str, Any] | None, str]] = {
    "no lease": (None, ""),
    "renewed 5 s ago, 15 s duration": (_lease("a", "2026-01-01T11:59:55.000000Z"), "a"),
    "renewed 16 s ago, 15 s duration": (_lease("a", "2026-01-01T11:59:44.000000Z"), ""),
    "released (no holder)": (_lease("", "2026-01-01T11:59:59.000000Z"), ""),
    "never renewed": (_lease("a", None), ""),
    "an hour's duration": (_lease("deploy", "2026-01-01T11:30:00.000000Z", 3600), "deploy"),
    "no spec at all": ({"metadata": {}}, ""),
}


@pytest.mark.parametrize(("lease", "holder"), CASES.values(), ids=list(CASES))
def test_the_current_holder(lease: dict[str, Any] | None, holder: str) -> None:
    assert current_holder(lease, NOW) == holder
