"""Pod creates the API server refuses: the pure part (controller.refusals and the plan's use of
it), played as the shell plays it — plan, act, and record the refusals in the status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller import refusals
from controller.actions import Event
from controller.status import fmt_time
from tests.plan.builders import World, at, condition, workers

SUCCESS = "SuccessfulCreate"
NOW = "2024-01-01T12:00:00Z"


def _created(*names: str) -> Event:
    return Event("Normal", SUCCESS, "created pod " + ", ".join(names), names)


@pytest.mark.parametrize(
    ("events", "not_created", "expected"),
    [
        ((_created("a-0", "a-1"),), set(), (_created("a-0", "a-1"),)),
        ((_created("a-0", "a-1"),), {"a-1"}, (_created("a-0"),)),
        ((_created("a-0", "a-1"),), {"a-0", "a-1"}, ()),
        (
            (Event("Warning", "ReplicaRestart", "restarting pod a-0"), _created("a-1")),
            {"a-0", "a-1"},
            (Event("Warning", "ReplicaRestart", "restarting pod a-0"),),
        ),
    ],
    ids=["all created", "one refused", "none created", "other events kept"],
)
def test_successful_create_names_only_the_pods_created(
    events: tuple[Event, ...], not_created: set[str], expected: tuple[Event, ...]
) -> None:
    assert refusals.confirmed_events(events, not_created) == expected


def _status(reason: str = "AllReplicasHealthy", value: str = "False") -> dict[str, Any]:
    cond = {
        "type": "ReplicaFailure",
        "status": value,
        "reason": reason,
        "message": "x",
        "lastTransitionTime": "2024-01-01T11:00:00Z",
        "lastUpdateTime": "2024-01-01T11:00:00Z",
    }
    return {"phase": "Pending", "conditions": [cond]}


def test_a_refused_create_makes_replica_failure_true_with_the_api_servers_reason() -> None:
    refused = {"a-1": "spec.containers[0].resources.requests: Invalid value: \"2\": must be less "
               "than or equal to cpu limit of 1", "a-0": "boom"}  # fmt: skip
    status = refusals.with_refused_creates(_status(), refused, NOW)
    cond = condition(status, "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreate")
    assert cond["message"] == (
        "creating pod a-0 was refused: boom; creating pod a-1 was refused: "
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
        "to cpu limit of 1"
    )
    assert cond["lastTransitionTime"] == NOW
    assert status["phase"] == "Pending"


def test_no_refusal_leaves_the_status_as_planned() -> None:
    status = _status()
    assert refusals.with_refused_creates(status, {}, NOW) is status


@pytest.mark.parametrize(
    ("old", "planned", "creating", "kept"),
    [
        (_status("FailedCreate", "True"), _status(), True, True),
        (_status("FailedCreate", "True"), _status(), False, False),  # the pod exists now
        (_status("ReplicaFailed", "True"), _status(), True, False),
        (_status("FailedCreate", "True"), _status("ReplicaFailed", "True"), True, False),
    ],
    ids=["still refused", "created since", "another failure before", "a failure now"],
)
def test_a_recorded_refusal_is_kept_while_the_pod_is_still_to_be_created(
    old: dict[str, Any], planned: dict[str, Any], creating: bool, kept: bool
) -> None:
    result = refusals.keep_failed_create(
        planned["conditions"], old["conditions"], creating=creating
    )
    assert result == (old["conditions"] if kept else planned["conditions"])


class RefusingWorld(World):
    """A world whose API server refuses creating the pods in `refuse`, as the shell sees it."""

    def __init__(self, job: dict[str, Any], refuse: set[str]) -> None:
        super().__init__(job)
        self.refuse = refuse
        self.events: list[Event] = []

    def round(self, seconds: float) -> None:
        result = self.plan(at(seconds))
        creates = {a.name for a in result.actions if a.kind == "Pod" and a.verb == "create"}
        refused = {name: "Invalid: cpu request above its limit" for name in creates & self.refuse}
        not_created = (creates & self.refuse) | (creates & set(self.pods))
        status = refusals.with_refused_creates(result.status, refused, fmt_time(at(seconds)))
        self.job["status"] = copy.deepcopy(status)
        kept = [a for a in result.actions if a.name not in refused]
        self.apply(type(result)(status, tuple(kept), result.events, result.requeue_after))
        self.events.extend(refusals.confirmed_events(result.events, not_created))


def test_a_job_whose_pod_is_refused_says_why_and_stays_put_until_fixed() -> None:
    world = RefusingWorld(workers(2), refuse={"mnist-worker-1"})
    world.round(1)
    assert [e.message for e in world.events if e.reason == SUCCESS] == [
        "created pod mnist-worker-0"
    ]
    cond = condition(world.job["status"], "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreate")
    assert "mnist-worker-1" in cond["message"]

    # Planning again (the refusal recorded) keeps saying why, without reporting a creation.
    # The status is unchanged, so the shell writes nothing (no round of watch events).
    world.events.clear()
    world.round(2)  # mnist-worker-0 is seen Pending
    before = copy.deepcopy(world.job["status"])
    world.round(2.5)
    assert world.job["status"] == before
    assert condition(before, "ReplicaFailure") == cond
    assert [e for e in world.events if e.reason == SUCCESS] == []

    # The job fixed: the retried create succeeds, is reported, and the condition clears.
    world.refuse = set()
    world.round(3)
    assert [e.message for e in world.events if e.reason == SUCCESS] == [
        "created pod mnist-worker-1"
    ]
    world.round(4)
    cond = condition(world.job["status"], "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("False", "AllReplicasHealthy")
