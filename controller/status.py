"""The pieces of a job's `.status`: conditions, per-replica entries, aggregate, times.

Why separate from the decisions: the status is an API (the seeds fix its shape: 状态), so how a
condition, a replica entry or the aggregate is written is defined once here, with the rules that
keep planning idempotent — a condition's `lastTransitionTime` moves only when its `status`
changes and `lastUpdateTime` only when its status, reason or message does; otherwise both are
carried over, so planning twice from the same observation gives the same status.

Shape (seeds) plus documented additions:
- `tasks[].replicas[].restartCount`: the replica's own restart count S, the ground truth of the
  crash-safe counting in `controller.restarts` — its recreations and its pod's in-place
  restarts, so it equals the pod annotation A plus the pod's RESTARTS (`tasks[].restartCount`
  is the sum per type, `backoffCount` the sum over all replicas);
- `tasks[].replicas[].attempts` (its ended runs, exit codes and kept logs,
  `controller.attempts`) and `stopped` (set when the controller stopped it for good);
- `readyReplicas`: `"<ready>/<total>"` for a printer column; ready = pods Running whose Ready
  condition is True (or that report no conditions).

Replica phases: the pod's phase (Pending, Running, Succeeded, Failed, Unknown), `Creating`
while the controller is creating its pod, `Deleted` once the pod was removed by pause or
clean-up (or is being removed) while unfinished, or by cleanUpPolicy All; a replica that had
ended on its own keeps showing Succeeded/Failed once clean-up removed its pod. An entry whose
pod is gone keeps the last uid and containers seen. Times are RFC 3339 in UTC with second precision, as the API
server writes them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = [
    "CONDITION_ORDER",
    "aggregate",
    "condition",
    "container_states",
    "fmt_time",
    "get_condition",
    "parse_time",
    "pod_ready",
    "replica_entry",
    "terminated_at",
]

CONDITION_ORDER = ("Initialized", "Running", "ReplicaFailure", "Completed", "Failed", "Paused")
AGGREGATE_KEYS = ("creating", "deleted", "failed", "pending", "running", "succeeded", "unknown")


def fmt_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def get_condition(conditions: Any, ctype: str) -> dict[str, Any] | None:
    for c in conditions or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def condition(
    old: dict[str, Any] | None, ctype: str, status: bool, reason: str, message: str, now: str
) -> dict[str, Any]:
    """The next condition `ctype`, carrying the old times when nothing changed."""
    value = "True" if status else "False"
    transition = now
    update = now
    if old is not None:
        if old.get("status") == value and old.get("lastTransitionTime"):
            transition = old["lastTransitionTime"]
        same = (old.get("status"), old.get("reason"), old.get("message")) == (
            value,
            reason,
            message,
        )
        if same and old.get("lastUpdateTime"):
            update = old["lastUpdateTime"]
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
        "lastUpdateTime": update,
    }


def container_states(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """`[{name, state, exitCode?}]` from the pod's containerStatuses, in their order; a
    waiting container's `exitCode` is its last run's (restarted in place)."""
    out: list[dict[str, Any]] = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if not isinstance(cs, dict):
            continue
        state = cs.get("state") or {}
        entry: dict[str, Any] = {"name": cs.get("name", "")}
        if "terminated" in state:
            entry["state"] = "Terminated"
            code = (state["terminated"] or {}).get("exitCode")
            if isinstance(code, int):
                entry["exitCode"] = code
        elif "running" in state:
            entry["state"] = "Running"
        else:
            entry["state"] = "Waiting"
            # waiting to be restarted in place (CrashLoopBackOff): its last run's exit code
            last = (cs.get("lastState") or {}).get("terminated")
            code = last.get("exitCode") if isinstance(last, dict) else None
            if isinstance(code, int):
                entry["exitCode"] = code
        out.append(entry)
    return out


def terminated_at(pod: dict[str, Any], container: str) -> datetime | None:
    """The `state.terminated.finishedAt` of the pod's `container`, when it has terminated."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(cs, dict) and cs.get("name") == container:
            term = (cs.get("state") or {}).get("terminated")
            return parse_time(term.get("finishedAt")) if isinstance(term, dict) else None
    return None


def replica_entry(
    name: str,
    phase: str,
    restart_count: int,
    pod: dict[str, Any] | None,
    old: dict[str, Any] | None,
) -> dict[str, Any]:
    """One `tasks[].replicas[]` entry; a pod that is gone keeps its last uid and containers."""
    entry: dict[str, Any] = {"name": name}
    if pod is not None:
        uid = (pod.get("metadata") or {}).get("uid")
        if uid:
            entry["uid"] = uid
        containers = container_states(pod)
    else:
        carried = phase != "Creating" and old is not None
        if carried and old is not None and old.get("uid"):
            entry["uid"] = old["uid"]
        containers = list(old.get("containers") or []) if carried and old else []
    entry["phase"] = phase
    entry["restartCount"] = restart_count
    entry["containers"] = containers
    return entry


def aggregate(phases: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(AGGREGATE_KEYS, 0)
    for phase in phases:
        key = phase.lower()
        if key in counts:
            counts[key] += 1
    return counts


def pod_ready(pod: dict[str, Any]) -> bool:
    """Running and Ready (a Running pod reporting no conditions counts as ready)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = status.get("conditions")
    if not conditions:
        return True
    ready = get_condition(conditions, "Ready")
    return ready is not None and ready.get("status") == "True"
