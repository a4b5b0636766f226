"""Replicas whose pod is on a lost node: which they are, and since when.

Why: when a node stops (crash, power, network partition) its kubelet stops reporting. The
node lifecycle controller marks the node's `Ready` condition Unknown after
`--node-monitor-grace-period` (~40–50 s), taints it `node.kubernetes.io/unreachable` (or
`not-ready`), and after the pods' toleration of that taint (300 s by default, added by the
DefaultTolerationSeconds admission plugin) deletes them (`DisruptionTarget`:
`DeletionByTaintManager`). Nobody completes that deletion: only the pod's kubelet confirms a
graceful delete, and PodGC removes such pods only once the node object is deleted (a cloud's
node controller does that for a vanished VM) or tainted `node.kubernetes.io/out-of-service`
by an operator. A replica pod — whose name is fixed, `<job>-<type>-<i>` — then stays
Terminating for ever and its replacement can never be created. The plan therefore decides
about such a replica itself (docs/CONTROLLER.md, "A lost node").

A pod is on a lost node when its `spec.nodeName` names a Node whose `Ready` condition is not
True and has not been True for `grace` seconds (`--lost-node-grace`), or whose pod is being
deleted, its deletion grace period is over, and the node is not Ready. A node absent from the
cache is not judged: a deleted node's pods are PodGC's (orphans), and a Node we cannot see
must not make us force-delete anything. Pure: nodes and `now` are arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.status import get_condition, parse_time

__all__ = ["DEFAULT_GRACE", "Lost", "lost_pod", "node_name", "not_ready_wait"]

DEFAULT_GRACE = 60.0
"""Seconds a node may be not Ready before its replica pods count as lost: after the node
lifecycle controller's ~40 s, well before the 300 s eviction; a kubelet that only missed a few
heartbeats (an API server restart, a short partition) comes back within it."""


@dataclass(frozen=True)
class Lost:
    """A pod's node, lost: its name, its Ready condition's status and since when."""

    node: str
    ready: str  # "False", "Unknown", or "absent" (no Ready condition)
    since: str | None  # the Ready condition's lastTransitionTime as the API gave it

    def describe(self) -> str:
        since = f" since {self.since}" if self.since else ""
        return f"its node {self.node} was lost (Ready {self.ready}{since})"


def node_name(pod: Mapping[str, Any]) -> str | None:
    name = (pod.get("spec") or {}).get("nodeName")
    return name if isinstance(name, str) and name else None


def _not_ready(node: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(Ready's status, since) when the node is not Ready, else None."""
    cond = get_condition((node.get("status") or {}).get("conditions"), "Ready")
    if cond is None:
        return "absent", None
    status = str(cond.get("status") or "Unknown")
    if status == "True":
        return None
    since = cond.get("lastTransitionTime")
    return status, since if isinstance(since, str) else None


def lost_pod(
    pod: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]], now: datetime, grace: float
) -> Lost | None:
    """The pod's node when it is lost (module docstring), else None."""
    name = node_name(pod)
    node = nodes.get(name) if name else None
    if name is None or node is None:
        return None
    found = _not_ready(node)
    if found is None:
        return None
    status, since = found
    lost = Lost(name, status, since)
    moment = parse_time(since)
    if moment is not None and (now - moment).total_seconds() >= grace:
        return lost
    deleting = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting is not None and deleting <= now:  # evicted, its grace period over
        return lost
    return None


def not_ready_wait(
    pod: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]], now: datetime, grace: float
) -> float | None:
    """Seconds until the pod counts as lost if its node stays not Ready (a timer: no event
    marks the grace's end), else None (Ready, unknown, or lost already)."""
    name = node_name(pod)
    node = nodes.get(name) if name else None
    found = _not_ready(node) if node is not None else None
    if found is None or lost_pod(pod, nodes, now, grace) is not None:
        return None
    lefts = []
    moment = parse_time(found[1])
    if moment is not None:
        lefts.append(grace - (now - moment).total_seconds())
    deleting = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting is not None:
        lefts.append((deleting - now).total_seconds())
    return min(lefts) if lefts else None
