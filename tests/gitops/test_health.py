"""Health per kind from one fixture per state, and the worst-of order (gitops-engine's)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops.engine.health import ORDER, Health, HealthStatus, assess, worst

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gitops"

STATES = {
    "tensorflowtrainingjob-succeeded": HealthStatus.HEALTHY,
    "tensorflowtrainingjob-running": HealthStatus.PROGRESSING,
    "tensorflowtrainingjob-failed": HealthStatus.DEGRADED,
    "tensorflowtrainingjob-paused": HealthStatus.SUSPENDED,
    "tensorflowtrainingjob-new": HealthStatus.PROGRESSING,
    "deployment-available": HealthStatus.HEALTHY,
    "deployment-rolling": HealthStatus.PROGRESSING,
    "deployment-unobserved": HealthStatus.PROGRESSING,
    "deployment-deadline": HealthStatus.DEGRADED,
    "deployment-paused": HealthStatus.SUSPENDED,
    "pod-crashloop": HealthStatus.DEGRADED,
    "pod-ready": HealthStatus.HEALTHY,
    "pod-pending": HealthStatus.PROGRESSING,
    "pod-failed": HealthStatus.DEGRADED,
    "configmap-present": HealthStatus.HEALTHY,
    "widget-present": HealthStatus.HEALTHY,
    "service-pendinglb": HealthStatus.PROGRESSING,
}


def health_of(name: str) -> Health:
    return assess(yaml.safe_load((FIXTURES / f"{name}.yaml").read_text()))


@pytest.mark.parametrize(("name", "status"), STATES.items(), ids=STATES.keys())
def test_each_fixture_has_its_documented_health(name: str, status: HealthStatus) -> None:
    assert health_of(name).status is status


def test_a_job_the_controller_has_not_seen_is_waiting_for_the_controller() -> None:
    assert health_of("tensorflowtrainingjob-new").message == "waiting for the controller"


def test_a_crashlooping_pod_names_its_container() -> None:
    assert health_of("pod-crashloop").message.startswith("container main: back-off")


def test_an_absent_object_is_missing() -> None:
    assert assess(None).status is HealthStatus.MISSING


def test_a_malformed_status_is_unknown_not_a_crash() -> None:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {},
        "status": {"updatedReplicas": "x"},
    }
    assert assess(obj).status is HealthStatus.UNKNOWN


def test_the_order_is_gitops_engines_health_order() -> None:
    assert [s.value for s in ORDER] == [
        "Healthy",
        "Suspended",
        "Progressing",
        "Missing",
        "Degraded",
        "Unknown",
    ]


WORST = {
    "none is healthy": ([], HealthStatus.HEALTHY),
    "progressing beats suspended": (
        [HealthStatus.SUSPENDED, HealthStatus.PROGRESSING],
        HealthStatus.PROGRESSING,
    ),
    "degraded beats missing": (
        [HealthStatus.DEGRADED, HealthStatus.MISSING],
        HealthStatus.DEGRADED,
    ),
    "unknown beats degraded": ([HealthStatus.UNKNOWN, HealthStatus.DEGRADED], HealthStatus.UNKNOWN),
}


@pytest.mark.parametrize(("statuses", "expected"), WORST.values(), ids=WORST.keys())
def test_worst_picks_the_worst_health(statuses: list[HealthStatus], expected: HealthStatus) -> None:
    assert worst(Health(s, s.value) for s in statuses).status is expected


def _job_with(phase: str, *conditions: tuple[str, str]) -> dict[str, object]:
    when = "2026-01-01T00:00:00Z"  # the controller writes several conditions in one second
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "a"},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": t, "status": "True", "message": m, "lastTransitionTime": when}
                for t, m in conditions
            ],
        },
    }


@pytest.mark.parametrize(
    ("phase", "condition", "expected"),
    [
        ("Running", "Running", "All replicas have started."),
        ("Succeeded", "Completed", "The job completed."),
        ("Failed", "Failed", "The chief failed."),
        ("Paused", "Paused", "The job is paused."),
    ],
)
def test_a_job_health_message_is_the_condition_of_its_phase_not_the_first_one(
    phase: str, condition: str, expected: str
) -> None:
    init = ("Initialized", "The job has been initialized successfully.")
    obj = _job_with(phase, init, (condition, expected))
    assert assess(obj).message == expected


def test_a_job_health_message_falls_back_to_the_latest_condition() -> None:
    obj = _job_with("Pending", ("Initialized", "first"), ("Other", "second"))
    assert assess(obj).message == "second"
