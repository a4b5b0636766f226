"""The JobRepository status stays small at any repository size (etcd refuses requests over
1.5 MiB): `gitops.engine.status` lists every resource of a small repository, only those needing
attention (capped) of a big one, and counts them all. Pure."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from gitops.engine import status
from gitops.engine.compare import Comparison, ResourceState
from gitops.engine.health import Health, HealthStatus
from gitops.engine.pairing import ResourceKey
from gitops.engine.records import FAILED, Outcome

NOW = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
SHA = "a" * 40
HEALTHY = Health(HealthStatus.HEALTHY)


def state(
    i: int, sync: str = "Synced", health: Health | None = HEALTHY, **more: Any
) -> ResourceState:
    key = ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "team-a", f"job-{i:05d}")
    return ResourceState(key, f"jobs/team-a/job-{i:05d}.yaml", 1, None, None, sync, health, **more)


def comparison(n: int, *, drifted: set[int] = frozenset(), message: str = "") -> Comparison:
    return Comparison(
        tuple(
            state(i, "OutOfSync", message=message or "differs") if i in drifted else state(i)
            for i in range(n)
        ),
        None,
    )


def operation(n: int, failed: set[int]) -> status.Operation:
    outcomes = tuple(
        Outcome(
            ResourceKey("", "ConfigMap", "team-a", f"cm-{i}"),
            FAILED if i in failed else "Synced",
            "admission webhook denied it: " + "x" * 2000 if i in failed else "created",
        )
        for i in range(n)
    )
    return status.Operation(SHA, None, NOW, NOW, outcomes, "Failed", "m", True)


def size(st: dict[str, Any]) -> int:
    return len(json.dumps(st, separators=(",", ":")).encode())


def test_a_small_repository_lists_every_resource() -> None:
    st = status.build({}, comparison(3, drifted={1}), SHA, NOW)
    assert [r["name"] for r in st["resources"]] == ["job-00000", "job-00001", "job-00002"]
    assert st["summary"] == {
        "total": 3,
        "listed": 3,
        "sync": {"Synced": 2, "OutOfSync": 1},
        "health": {"Healthy": 3},
    }


def test_ten_thousand_resources_make_a_status_well_under_one_mib() -> None:
    drifted = set(range(0, 10_000, 7))  # 1,429 need attention: more than the cap
    st = status.build(
        {},
        comparison(10_000, drifted=drifted, message="m" * 5000),
        SHA,
        NOW,
        operation(10_000, failed=set(range(0, 10_000, 3))),
    )
    assert size(st) < 600 * 1024
    listed = st["resources"]
    assert 0 < len(listed) <= status.RESOURCE_LIMIT
    assert all(r["status"] == "OutOfSync" for r in listed)
    assert all(len(r["message"]) <= status.MESSAGE_LIMIT for r in listed)
    assert st["summary"]["total"] == 10_000 and st["summary"]["listed"] == len(listed)
    assert st["summary"]["sync"] == {"Synced": 10_000 - len(drifted), "OutOfSync": len(drifted)}
    result = st["operationState"]["syncResult"]
    assert result["total"] == 10_000 and 0 < len(result["resources"]) <= status.RESOURCE_LIMIT
    assert all(r["status"] == FAILED for r in result["resources"])


def test_a_big_healthy_repository_lists_nothing_and_counts_everything() -> None:
    st = status.build({}, comparison(10_000), SHA, NOW)
    assert st["resources"] == [] and size(st) < 4096
    assert st["summary"]["sync"] == {"Synced": 10_000}


def test_only_the_important_entries_are_kept_when_the_list_is_cut() -> None:
    def important(e: dict[str, Any]) -> bool:
        return bool(e["bad"])

    entries = [{"n": i, "bad": i % 2} for i in range(6)]
    assert status.bounded(entries, important, limit=6) == entries
    assert [e["n"] for e in status.bounded(entries, important, limit=4)] == [1, 3, 5]
    assert [e["n"] for e in status.bounded(entries, important, limit=2)] == [1, 3]
    assert [e["n"] for e in status.bounded(entries, important, limit=6, budget=40)] == [1, 3]


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (None, None),
        (set(), []),
        (
            {("rbac.authorization.k8s.io/v1", "Role"), ("v1", "PersistentVolumeClaim")},
            [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"},
                {"apiVersion": "v1", "kind": "PersistentVolumeClaim"},
            ],
        ),
    ],
)
def test_applied_kinds_are_recorded_and_read_back(
    kinds: set[tuple[str, str]] | None, expected: list[dict[str, str]] | None
) -> None:
    st = status.build({}, comparison(1), SHA, NOW, kinds=kinds)
    assert st.get("appliedKinds") == expected
    assert status.applied_kinds(st) == (kinds or set())
    kept = status.with_condition(st, status.COMPARISON_ERROR, "GitError", "down", NOW)
    assert status.applied_kinds(kept) == (kinds or set())


def test_applied_kinds_ignore_garbage() -> None:
    assert status.applied_kinds({"appliedKinds": [{"kind": "Role"}, "x", None]}) == set()
