"""Creates the API server refused: what the job's status and events say, and when to retry.

The plan cannot know whether a create will be accepted; the shell does, once it has sent it.
A refusal is any answer that judges the request rather than failing to answer it: 403
(ResourceQuota exceeded, PodSecurity, a policy engine's admission webhook, RBAC), 422 Invalid,
400, 404 (the namespace is being deleted)… — everything in 4xx except AlreadyExists (the object
exists: created before) and 429 (too many requests: the API server is busy, retried like an
outage). These pure functions take what the shell saw — which replica pods and Services were
refused, with the API server's message — and give the status and events that tell the truth:
SuccessfulCreate names only the pods created, and ReplicaFailure is True (reason FailedCreate)
with the refusal, so `kubectl describe` and the dashboard say why the job stays Pending.

Retrying: a refusal is not an error of the controller's (which the work queue would retry with
client-go's back-off, up to 1,000 s), and most causes go away without the job changing — a
quota freed by another job, a raised quota, a relabelled namespace, a policy changed. So the
reconcile succeeds and asks to be called again after `retry_after`: as long as the refusal has
lasted so far (since ReplicaFailure turned True), at least 1 s and at most `MAX_RETRY_SECONDS`.
That doubles the wait from one retry to the next (1, 2, 4, … s) without any state of its own —
the condition's `lastTransitionTime` is the state, so a restarted controller continues where
the last one was — and bounds it to 5 minutes. A change that may remove the cause (a
ResourceQuota of the namespace updated) requeues the job at once (controller.manager).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from controller.actions import Event
from controller.lifecycle import with_condition
from controller.status import condition, get_condition, parse_time

__all__ = [
    "FAILED_CREATE",
    "MAX_RETRY_SECONDS",
    "MIN_RETRY_SECONDS",
    "confirmed_events",
    "is_refusal",
    "keep_failed_create",
    "refused_before",
    "retry_after",
    "with_refused_creates",
]

FAILED_CREATE = "FailedCreate"
MIN_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 300.0


def is_refusal(status: int) -> bool:
    """Whether an API error's HTTP status judges the request (4xx but 429; AlreadyExists is
    told apart by the caller) rather than reporting a failure to answer it."""
    return 400 <= status < 500 and status != 429


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
    status: dict[str, Any], refused: Mapping[tuple[str, str], str], now: str
) -> dict[str, Any]:
    """`status` with ReplicaFailure True, reason FailedCreate, naming each refused object and
    the API server's reason (`refused`: (kind, name) → message; kind Pod or Service)."""
    if not refused:
        return status
    message = "; ".join(
        f"creating {kind.lower()} {name} was refused: {why}"
        for (kind, name), why in sorted(refused.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    )
    conditions = list(status.get("conditions") or [])
    old = get_condition(conditions, "ReplicaFailure")
    cond = condition(old, "ReplicaFailure", True, FAILED_CREATE, message, now)
    return {**status, "conditions": with_condition(conditions, cond)}


def keep_failed_create(
    conditions: list[dict[str, Any]], old_conditions: list[dict[str, Any]], *, creating: bool
) -> list[dict[str, Any]]:
    """`conditions` with the old FailedCreate ReplicaFailure kept while a replica's pod or
    Service is still to be created (`creating`): the plan sees no failure there, only a missing
    object, and would otherwise clear the refusal the shell recorded, every round."""
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


def retry_after(status: dict[str, Any], now: datetime) -> float | None:
    """Seconds until a refused create should be tried again, or None when none was refused:
    as long as the refusal has lasted (since ReplicaFailure turned True), within
    [`MIN_RETRY_SECONDS`, `MAX_RETRY_SECONDS`]."""
    conditions = status.get("conditions") or []
    if not refused_before(conditions):
        return None
    since = parse_time(
        (get_condition(conditions, "ReplicaFailure") or {}).get("lastTransitionTime")
    )
    lasted = (now - since).total_seconds() if since is not None else MAX_RETRY_SECONDS
    return min(MAX_RETRY_SECONDS, max(MIN_RETRY_SECONDS, lasted))
