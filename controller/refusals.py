"""Pod creates the API server refused: what the job's status and events say about them.

The plan cannot know whether a create will be accepted; the shell does, once it has sent it.
These pure functions take what the shell saw — the names of the pods refused as Invalid, with
the API server's message — and give the status and events that tell the truth: SuccessfulCreate
names only the pods created, and ReplicaFailure is True (reason FailedCreate) with the refusal,
so `kubectl describe` and the dashboard say why the job stays Pending.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from controller.actions import Event
from controller.lifecycle import with_condition
from controller.status import condition, get_condition

__all__ = [
    "FAILED_CREATE",
    "confirmed_events",
    "keep_failed_create",
    "refused_before",
    "with_refused_creates",
]

FAILED_CREATE = "FailedCreate"


def confirmed_events(events: Iterable[Event], refused: Collection[str]) -> tuple[Event, ...]:
    """`events` without the pods in `refused` among those an event reports created (`created`);
    an event left with none is dropped."""
    out = []
    for event in events:
        if event.created:
            kept = tuple(name for name in event.created if name not in refused)
            if not kept:
                continue
            if kept != event.created:
                message = "created pod " + ", ".join(kept)
                event = Event(event.type, event.reason, message, created=kept)
        out.append(event)
    return tuple(out)


def with_refused_creates(
    status: dict[str, Any], refused: Mapping[str, str], now: str
) -> dict[str, Any]:
    """`status` with ReplicaFailure True, reason FailedCreate, naming each refused pod and the
    API server's reason (`refused`: pod name → message)."""
    if not refused:
        return status
    message = "; ".join(
        f"creating pod {name} was refused: {why}" for name, why in sorted(refused.items())
    )
    conditions = list(status.get("conditions") or [])
    old = get_condition(conditions, "ReplicaFailure")
    cond = condition(old, "ReplicaFailure", True, FAILED_CREATE, message, now)
    return {**status, "conditions": with_condition(conditions, cond)}


def keep_failed_create(
    conditions: list[dict[str, Any]], old_conditions: list[dict[str, Any]], *, creating: bool
) -> list[dict[str, Any]]:
    """`conditions` with the old FailedCreate ReplicaFailure kept while a pod is still to be
    created (`creating`): the plan sees no failure there, only a missing pod, and would otherwise
    clear the refusal the shell recorded, every round."""
    old = get_condition(old_conditions, "ReplicaFailure")
    new = get_condition(conditions, "ReplicaFailure") or {}
    if not creating or old is None or new.get("status") == "True":
        return conditions
    return with_condition(conditions, old) if refused_before(old_conditions) else conditions


def refused_before(old_conditions: list[dict[str, Any]]) -> bool:
    """Whether the old status says a pod create was refused (then the creates planned now are
    retries, reported again if they succeed)."""
    old = get_condition(old_conditions, "ReplicaFailure") or {}
    return old.get("status") == "True" and old.get("reason") == FAILED_CREATE
