"""The planning core's output types: `Action`, `Event`, `Plan` (docs/CONTROLLER.md).

Why a module of their own: every planning module (replicas, TensorBoard, status) produces
actions and events, and `controller.plan` assembles them; defining the types here lets the
helpers build them without importing the entry point. `controller.plan` re-exports them, which
is where the shell imports them from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from controller.attempts import LogKeep

__all__ = ["REPLICA", "Action", "Event", "Plan"]

REPLICA = "replica"
"""`Action.reason` of a replica's pod or Service: a refused one sets ReplicaFailure."""


@dataclass(frozen=True)
class Action:
    # update: TensorBoard Deployment only; keep: a pod's log only (`keep_log`)
    verb: Literal["create", "update", "delete", "keep"]
    kind: Literal["Pod", "Service", "Deployment"]
    name: str
    body: dict[str, Any] | None = None  # create/update: the whole object, ownerReferences included
    uid: str | None = None  # delete/update: precondition, so a newer object of that name survives
    reason: str = ""  # for logs; REPLICA for a replica's pod or Service
    # keep, or delete of a pod: keep that run's log first (controller.attempts)
    keep_log: LogKeep | None = None
    # delete of a pod on a lost node: gracePeriodSeconds 0, no kubelet left to confirm it
    # (controller.lostnodes; the risk is argued in docs/CONTROLLER.md, "A lost node")
    force: bool = False


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    created: tuple[str, ...] = ()  # the pods this event reports created (the shell drops refused)


@dataclass(frozen=True)
class Plan:
    status: dict[str, Any]  # the complete next .status
    actions: tuple[Action, ...]
    events: tuple[Event, ...]  # on the job, for every transition
    requeue_after: float | None  # seconds until a timer (the deadline) must fire
