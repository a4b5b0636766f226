"""View model of the job page (pure): phase, condition timeline, replicas, budgets, events.

Inputs are the API server's JSON: the training job (with the `.status` the controller writes,
docs/CONTROLLER.md: `conditions`, `tasks[].replicas[]` with phase, restartCount and containers'
exit codes, `aggregate`, `backoffCount`, `startTime`, `completionTime`, `tensorboard`), its pods
and its Events. The deadline arithmetic mirrors the controller's (`runPolicy.
activeDeadlineSeconds` counted from the start, or from the last resume; stopped while paused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dashboard.format import (
    age,
    ago,
    as_dict,
    as_list,
    condition_tone,
    parse_time,
    phase_badge,
    text,
)
from dashboard.views import JOB_PLURALS, job_path, repository_path, segment
from gitops.api.show import FINISHED_PHASES, finished_replicas
from gitops.engine import handheld
from policies.durations import human_duration
from policies.schema import MAIN_CONTAINERS

__all__ = [
    "REPOSITORY_ANNOTATION",
    "backoff",
    "deadline",
    "event_time",
    "job_detail",
    "pod_summary",
]

REPOSITORY_ANNOTATION = "gitops.trainops.dev/repository"
_FINISHED = FINISHED_PHASES
_ORDER = ("Initialized", "Running", "ReplicaFailure", "Paused", "Completed", "Failed")


def job_detail(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    now: datetime,
) -> dict[str, Any]:
    """Everything the job page shows."""
    meta = as_dict(job.get("metadata"))
    spec = as_dict(job.get("spec"))
    status = as_dict(job.get("status"))
    namespace, name, kind = (
        text(meta.get("namespace")),
        text(meta.get("name")),
        text(job.get("kind")),
    )
    phase = text(status.get("phase")) or "Pending"
    paused = as_dict(as_dict(spec.get("runMode")).get("pause")).get("enabled") is True
    repository = text(as_dict(meta.get("annotations")).get(REPOSITORY_ANNOTATION))
    replicas = _replicas(name, spec, status, pods, now, MAIN_CONTAINERS.get(kind, ""))
    ns, _, rname = repository.partition("/")
    return {
        "key": f"{namespace}/{name}",
        "namespace": namespace,
        "name": name,
        "kind": kind,
        "plural": JOB_PLURALS.get(kind, ""),
        "path": job_path(namespace, kind, name),
        "phase": phase_badge(phase),
        "paused": paused,
        "finished": phase in _FINISHED,
        "age": age(meta.get("creationTimestamp"), now),
        "created": text(meta.get("creationTimestamp")),
        "repository": repository,
        "repository_path": repository_path(ns, rname) if ns and rname else None,
        "conditions": _timeline(status, now),
        "not_in_effect": _not_in_effect(status),
        "replicas": replicas,
        "ready": (
            finished_replicas(status.get("tasks"))
            if phase in _FINISHED
            else text(status.get("readyReplicas"))
        ),
        "backoff": backoff(spec, status),
        "deadline": deadline(spec, status, now),
        "events": _events(events, now),
        "log_pods": [r["pod"] for r in replicas if r["pod_exists"]],
        "tensorboard": _tensorboard(namespace, name, spec, status),
        "held": [_field_name(p) for p in handheld.held_pointers(job)] if repository else [],
    }


def _field_name(pointer: str) -> str:
    """`/spec/runMode/pause/enabled` → `spec.runMode.pause.enabled`."""
    return ".".join(p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/"))


def backoff(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """`used / limit` (`1 / 3`, or `1 / unlimited` without `runPolicy.backoffLimit`)."""
    used = status.get("backoffCount")
    limit = as_dict(spec.get("runPolicy")).get("backoffLimit")
    shown = str(limit) if isinstance(limit, int) else "unlimited"
    return f"{used if isinstance(used, int) else 0} / {shown}"


def deadline(spec: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> str:
    """Time left to `runPolicy.activeDeadlineSeconds`, or why there is none to count."""
    seconds = as_dict(spec.get("runPolicy")).get("activeDeadlineSeconds")
    if not isinstance(seconds, int):
        return "no deadline"
    if text(status.get("phase")) in _FINISHED or status.get("completionTime"):
        return f"finished (deadline {human_duration(seconds)})"
    paused = _condition(status, "Paused")
    if paused is not None and paused.get("status") == "True":
        return f"stopped while paused (deadline {human_duration(seconds)})"
    since = parse_time(status.get("startTime"))
    resumed = parse_time((paused or {}).get("lastTransitionTime"))
    if resumed is not None and (since is None or resumed > since):
        since = resumed
    if since is None:
        return f"{human_duration(seconds)} left (not started)"
    left = seconds - (now - since).total_seconds()
    if left <= 0:
        return "deadline exceeded"
    return f"{human_duration(left)} left"


def pod_summary(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod as the job API lists it: name, phase, node, restarts, container states."""
    meta = as_dict(pod.get("metadata"))
    status = as_dict(pod.get("status"))
    containers = []
    for cs in map(as_dict, as_list(status.get("containerStatuses"))):
        state = as_dict(cs.get("state"))
        entry: dict[str, Any] = {"name": text(cs.get("name")), "state": next(iter(state), "")}
        code = as_dict(state.get("terminated")).get("exitCode")
        if isinstance(code, int):
            entry["exitCode"] = code
        containers.append(entry)
    return {
        "name": text(meta.get("name")),
        "phase": text(status.get("phase")),
        "node": text(as_dict(pod.get("spec")).get("nodeName")),
        "deleting": bool(meta.get("deletionTimestamp")),
        "containers": containers,
    }


def _replicas(
    job: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    now: datetime,
    main: str,
) -> list[dict[str, Any]]:
    by_name = {text(as_dict(p.get("metadata")).get("name")): p for p in pods}
    entries: list[tuple[str, dict[str, Any]]] = []
    for task in map(as_dict, as_list(status.get("tasks"))):
        for entry in map(as_dict, as_list(task.get("replicas"))):
            entries.append((text(task.get("type")), entry))
    if not entries:  # no status yet: what the spec asks for
        for rs in map(as_dict, as_list(spec.get("replicaSpecs"))):
            count = rs.get("replicas")
            for i in range(count if isinstance(count, int) else 1):
                rtype = text(rs.get("type"))
                entries.append((rtype, {"name": f"{job}-{rtype.lower()}-{i}"}))
    out = []
    for rtype, entry in entries:
        pod_name = text(entry.get("name"))
        pod = by_name.get(pod_name)
        index = pod_name.rsplit("-", 1)[-1] if pod_name.startswith(f"{job}-") else ""
        phase = text(entry.get("phase")) or text(as_dict((pod or {}).get("status")).get("phase"))
        codes = [
            c["exitCode"]
            for c in map(as_dict, as_list(entry.get("containers")))
            if isinstance(c.get("exitCode"), int)
        ]
        if not codes and pod is not None:
            codes = [c["exitCode"] for c in pod_summary(pod)["containers"] if "exitCode" in c]
        restarts = entry.get("restartCount")
        out.append(
            {
                "id": f"{rtype.lower()}-{index}",
                "type": rtype.lower(),
                "index": index,
                "pod": pod_name,
                "pod_exists": pod is not None,
                "phase": phase_badge(phase or "Pending"),
                "restarts": restarts if isinstance(restarts, int) else 0,
                "exit_code": ", ".join(str(c) for c in codes),
                "attempts": _attempts(entry, pod, now, main),
            }
        )
    return out


def _attempts(
    entry: Mapping[str, Any], pod: Mapping[str, Any] | None, now: datetime, main: str
) -> list[dict[str, Any]]:
    """The replica's ended runs as the controller recorded them (`status.tasks[].replicas[]
    .attempts`, oldest first): exit code, reason, when it ended, and where its log is — kept
    by the controller in a ConfigMap, or the pod's previous run while the pod that ran it
    lives (`kubectl logs --previous`: the main container's `lastState`, the pod's latest ended
    run while the container runs or waits to run again, the one before it once the container
    has ended for good — its own run is then the pod's current log)."""
    out = []
    uid = as_dict(as_dict(pod).get("metadata")).get("uid") if pod is not None else None
    for a in map(as_dict, as_list(entry.get("attempts"))):
        kept = as_dict(a.get("keptLog"))
        code = a.get("exitCode")
        out.append(
            {
                "attempt": a.get("attempt") if isinstance(a.get("attempt"), int) else "",
                "exit_code": code if isinstance(code, int) else "",
                "reason": text(a.get("reason")),
                "ended": ago(a.get("finishedAt"), now),
                "kept": f"{text(kept.get('configMap'))}/{text(kept.get('key'))}"
                if kept.get("configMap") and kept.get("key")
                else "",
                "previous": False,
                "current": False,
                "pod_uid": a.get("podUID"),
            }
        )
    mine = [a for a in out if uid and a.pop("pod_uid") == uid] if uid else []
    for a in out:
        a.pop("pod_uid", None)
    statuses = as_list(as_dict(as_dict(pod).get("status")).get("containerStatuses"))
    container = next((as_dict(c) for c in statuses if as_dict(c).get("name") == main), {})
    ended = "terminated" in as_dict(container.get("state"))
    shown = mine[-2:-1] if ended else mine[-1:]  # what `--previous` shows, if any
    for a in shown:
        a["previous"] = True
    if ended and mine:
        mine[-1]["current"] = True  # `kubectl logs <pod>`
    return out


def _timeline(status: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The conditions that are True, in the order they became so (a False one — `Failed
    False` from the start — never happened, so it is no step of the timeline)."""
    conditions = [
        c
        for c in map(as_dict, as_list(status.get("conditions")))
        if c.get("type") and c.get("status") == "True"
    ]

    def order(c: Mapping[str, Any]) -> tuple[float, int]:
        kind = text(c.get("type"))
        rank = _ORDER.index(kind) if kind in _ORDER else len(_ORDER)
        moment = parse_time(c.get("lastTransitionTime"))
        return (moment.timestamp() if moment else 0.0, rank)

    return [
        {
            "type": text(c.get("type")),
            "status": text(c.get("status")),
            "tone": condition_tone(c.get("type"), c.get("status")),
            "reason": text(c.get("reason")),
            "message": text(c.get("message")),
            "time": ago(c.get("lastTransitionTime"), now),
            "timestamp": text(c.get("lastTransitionTime")),
            "current": True,
        }
        for c in sorted(conditions, key=order)
    ]


def _not_in_effect(status: Mapping[str, Any]) -> list[dict[str, str]]:
    """The conditions that are not True (`Paused False`, reason `Resumed`), listed muted under
    the timeline."""
    return [
        {
            "type": text(c.get("type")),
            "status": text(c.get("status")),
            "reason": text(c.get("reason")),
        }
        for c in map(as_dict, as_list(status.get("conditions")))
        if c.get("type") and c.get("status") != "True"
    ]


_NEVER = datetime.min.replace(tzinfo=UTC)


def event_time(e: Mapping[str, Any]) -> datetime | None:
    """When an Event last happened: `lastTimestamp` (core/v1), else `series.lastObservedTime`
    or `eventTime` (events.k8s.io/v1), else `firstTimestamp`, else its creation."""
    for value in (
        e.get("lastTimestamp"),
        as_dict(e.get("series")).get("lastObservedTime"),
        e.get("eventTime"),
        e.get("firstTimestamp"),
        as_dict(e.get("metadata")).get("creationTimestamp"),
    ):
        moment = parse_time(value)
        if moment is not None:
            return moment
    return None


def _event_order(e: Mapping[str, Any]) -> tuple[datetime, datetime, int]:
    """Oldest first, as `kubectl get events --sort-by=.lastTimestamp` and `kubectl describe`
    list them. Times have whole seconds, so ties are common: then by `firstTimestamp`, then by
    `resourceVersion` (the order the API server stored them; an integer on etcd and on the
    embedded server, opaque elsewhere: ignored when it is not)."""
    first = parse_time(e.get("firstTimestamp")) or parse_time(e.get("eventTime"))
    version = text(as_dict(e.get("metadata")).get("resourceVersion"))
    return (
        event_time(e) or _NEVER,
        first or _NEVER,
        int(version) if version.isdigit() else 0,
    )


def _events(events: Sequence[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    out = []
    for e in sorted(events, key=_event_order):
        count = e.get("count")
        moment = event_time(e)
        stamp = moment.isoformat().replace("+00:00", "Z") if moment else ""
        out.append(
            {
                "type": text(e.get("type")) or "Normal",
                "reason": text(e.get("reason")),
                "message": text(e.get("message")),
                "count": count if isinstance(count, int) else 1,
                "time": ago(stamp, now),
                "timestamp": stamp,
                "object": text(as_dict(e.get("involvedObject")).get("name")),
            }
        )
    return out


def _tensorboard(
    namespace: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The TensorBoard Service `<job>-tensorboard` (port 6006) through `kubectl proxy`'s
    default address, the way to reach a Service from a browser without exposing it."""
    if not isinstance(spec.get("tensorboardSpec"), dict):
        return None
    service = f"{name}-tensorboard"
    board = as_dict(status.get("tensorboard"))
    return {
        "service": service,
        "ready": board.get("ready") is True,
        "note": text(board.get("note")),
        "url": (
            f"http://127.0.0.1:8001/api/v1/namespaces/{segment(namespace)}"
            f"/services/{segment(service)}:6006/proxy/"
        ),
    }


def _condition(status: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in map(as_dict, as_list(status.get("conditions"))):
        if c.get("type") == kind:
            return c
    return None
