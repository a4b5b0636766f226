"""Pod creates the API server refuses: the pure part (controller.refusals and the plan's use of
it), played as the shell plays it — plan, act, and record the refusals in the status."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest

from controller import refusals
from controller.actions import Event
from controller.status import fmt_time, parse_time
from tests.plan.builders import World, at, condition, workers

SUCCESS = "SuccessfulCreate"
NOW = "2024-01-01T12:00:00Z"


def at_text(text: str) -> datetime:
    moment = parse_time(text)
    assert moment is not None
    return moment


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
    refused = {("Pod", "a-1"): "spec.containers[0].resources.requests: Invalid value: \"2\": "
               "must be less than or equal to cpu limit of 1", ("Pod", "a-0"): "boom"}  # fmt: skip
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
    """A world whose API server refuses creating the pods in `refuse` (and the Services in
    `refuse_services`), as the shell sees it."""

    def __init__(
        self, job: dict[str, Any], refuse: set[str], refuse_services: set[str] | None = None
    ) -> None:
        super().__init__(job)
        self.refuse = refuse
        self.refuse_services = refuse_services or set()
        self.events: list[Event] = []
        self.retry: float | None = None

    def round(self, seconds: float) -> None:
        result = self.plan(at(seconds))
        creates = {(a.kind, a.name) for a in result.actions if a.verb == "create"}
        refusing = {("Pod", n) for n in self.refuse} | {
            ("Service", n) for n in self.refuse_services
        }
        refused: dict[tuple[str, str], str] = {
            key: f"{key[0]}s {key[1]!r} is forbidden: exceeded quota: q"
            for key in creates & refusing
        }
        pods = {name for kind, name in creates if kind == "Pod"}
        not_created = (pods & self.refuse) | (pods & set(self.pods))
        status = refusals.with_refused_creates(result.status, refused, fmt_time(at(seconds)))
        self.job["status"] = copy.deepcopy(status)
        self.retry = refusals.retry_after(status, at(seconds))
        kept = [a for a in result.actions if (a.kind, a.name) not in refused]
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


def test_a_refused_service_says_why_and_is_kept_until_it_is_created() -> None:
    """A Service quota refuses a replica's Service while its pod is created: the condition
    names the Service and is not cleared by the next round (the pod exists, the Service not)."""
    world = RefusingWorld(workers(1), refuse=set(), refuse_services={"mnist-worker-0"})
    world.round(1)
    cond = condition(world.job["status"], "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreate")
    assert cond["message"] == (
        "creating service mnist-worker-0 was refused: "
        "Services 'mnist-worker-0' is forbidden: exceeded quota: q"
    )
    world.round(2)
    assert condition(world.job["status"], "ReplicaFailure") == cond
    world.refuse_services = set()
    world.round(3)
    world.round(4)
    cond = condition(world.job["status"], "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("False", "AllReplicasHealthy")
    assert world.retry is None


def test_a_pod_and_a_service_of_one_name_refused_are_both_named() -> None:
    refused = {("Service", "a-0"): "no services", ("Pod", "a-0"): "no pods"}
    cond = condition(refusals.with_refused_creates(_status(), refused, NOW), "ReplicaFailure")
    assert cond["message"] == (
        "creating pod a-0 was refused: no pods; creating service a-0 was refused: no services"
    )


def _refused_since(transition: str) -> dict[str, Any]:
    status = _status("FailedCreate", "True")
    status["conditions"][0]["lastTransitionTime"] = transition
    return status


@pytest.mark.parametrize(
    ("status", "seconds"),
    [
        (_status(), None),
        (_status("ReplicaFailed", "True"), None),
        (_refused_since(NOW), 1.0),  # just refused: the minimum
        (_refused_since("2024-01-01T11:59:58Z"), 2.0),  # as long as it has lasted: doubling
        (_refused_since("2024-01-01T11:59:00Z"), 60.0),
        (_refused_since("2024-01-01T11:00:00Z"), 300.0),  # bounded to 5 minutes
        (_refused_since("not a time"), 300.0),
    ],
    ids=["none", "another failure", "just now", "2 s ago", "a minute ago", "an hour ago", "bad"],
)
def test_a_refused_create_is_retried_after_as_long_as_it_lasted_at_most_five_minutes(
    status: dict[str, Any], seconds: float | None
) -> None:
    assert refusals.retry_after(status, at_text(NOW)) == seconds


def test_every_round_of_a_lasting_refusal_waits_longer_up_to_five_minutes() -> None:
    world = RefusingWorld(workers(1), refuse={"mnist-worker-0"})
    now, waits = 1.0, []
    for _ in range(12):
        world.round(now)
        assert world.retry is not None
        waits.append(world.retry)
        now += world.retry
    assert waits[:4] == [1.0, 1.0, 2.0, 4.0]
    assert waits == sorted(waits)
    assert waits[-1] == refusals.MAX_RETRY_SECONDS


@pytest.mark.parametrize(
    ("status", "refusal"),
    [(400, True), (403, True), (404, True), (409, True), (422, True), (429, False),
     (500, False), (503, False), (0, False)],
)  # fmt: skip
def test_a_refusal_is_an_answer_judging_the_request_not_a_failure_to_answer(
    status: int, refusal: bool
) -> None:
    assert refusals.is_refusal(status) is refusal
