"""Health of one live object (pure), and of a repository: the worst of its resources.

One small function per kind, dispatched on (group, kind) as gitops-engine's `pkg/health` does;
each takes the live object (None when it does not exist) and returns `Health(status, message)`.
Kinds without a check are Healthy when present, as in Argo CD.

The order, from best to worst, is gitops-engine's `healthOrder` (pkg/health/health.go):
Healthy < Suspended < Progressing < Missing < Degraded < Unknown. `worst` follows it, so a
repository with one Degraded job is Degraded, and Unknown (a check that could not decide)
outranks everything.

Training jobs are judged by `.status.phase` as the trainops controller writes it: Succeeded →
Healthy; Pending, Running, Resuming → Progressing; Failed → Degraded; Paused → Suspended; no
phase yet (or Unknown) → Progressing, "waiting for the controller" — a job the controller has
not seen is on its way, not broken (if no controller runs, it stays so; the message says it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, NamedTuple

import policies
from gitops.engine import names

__all__ = ["ORDER", "Health", "HealthStatus", "assess", "worst"]


class HealthStatus(StrEnum):
    HEALTHY = "Healthy"
    SUSPENDED = "Suspended"
    PROGRESSING = "Progressing"
    MISSING = "Missing"
    DEGRADED = "Degraded"
    UNKNOWN = "Unknown"


ORDER: tuple[HealthStatus, ...] = tuple(HealthStatus)
"""Best to worst (gitops-engine's healthOrder)."""
_RANK = {s: i for i, s in enumerate(ORDER)}


class Health(NamedTuple):
    status: HealthStatus
    message: str = ""


def worst(healths: Iterable[Health]) -> Health:
    """The worst health (the first of equals); Healthy for none."""
    found = Health(HealthStatus.HEALTHY)
    for h in healths:
        if _RANK[h.status] > _RANK[found.status]:
            found = h
    return found


def assess(obj: dict[str, Any] | None) -> Health:
    """The health of a live object; Missing when it does not exist."""
    if obj is None:
        return Health(HealthStatus.MISSING, "the object does not exist")
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    check = _CHECKS.get((group, str(obj.get("kind", ""))))
    if check is None:
        return Health(HealthStatus.HEALTHY)
    try:
        return check(obj)
    except (AttributeError, TypeError, ValueError, KeyError) as e:  # malformed status
        return Health(HealthStatus.UNKNOWN, f"cannot assess health: {type(e).__name__}")


# --- per kind ---------------------------------------------------------------------------------


_PHASE_CONDITION = {
    "Running": "Running",
    "Succeeded": "Completed",
    "Failed": "Failed",
    "Paused": "Paused",
}
"""The condition whose message explains a training job's phase."""


def _training_job(obj: dict[str, Any]) -> Health:
    status = _dict(obj.get("status"))
    phase = status.get("phase")
    message = _condition_message(status, _PHASE_CONDITION.get(str(phase))) or ""
    if phase == "Succeeded":
        return Health(HealthStatus.HEALTHY, message or "the job succeeded")
    if phase in ("Pending", "Running", "Resuming"):
        return Health(HealthStatus.PROGRESSING, message or f"the job is {phase.lower()}")
    if phase == "Failed":
        return Health(HealthStatus.DEGRADED, message or "the job failed")
    if phase == "Paused":
        return Health(HealthStatus.SUSPENDED, message or "the job is paused")
    return Health(HealthStatus.PROGRESSING, "waiting for the controller")


def _deployment(obj: dict[str, Any]) -> Health:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    if spec.get("paused"):
        return Health(HealthStatus.SUSPENDED, "Deployment is paused")
    generation = _dict(obj.get("metadata")).get("generation", 0)
    if generation > status.get("observedGeneration", 0):
        return Health(
            HealthStatus.PROGRESSING,
            "Waiting for rollout to finish: observed deployment generation less than desired "
            "generation",
        )
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            name = _dict(obj.get("metadata")).get("name", "")
            return Health(
                HealthStatus.DEGRADED, f'Deployment "{name}" exceeded its progress deadline'
            )
    wanted = spec.get("replicas", 1)
    updated = status.get("updatedReplicas", 0)
    replicas = status.get("replicas", 0)
    available = status.get("availableReplicas", 0)
    if updated < wanted:
        return Health(
            HealthStatus.PROGRESSING,
            f"Waiting for rollout to finish: {updated} out of {wanted} new replicas have been "
            "updated...",
        )
    if replicas > updated:
        return Health(
            HealthStatus.PROGRESSING,
            f"Waiting for rollout to finish: {replicas - updated} old replicas are pending "
            "termination...",
        )
    if available < updated:
        return Health(
            HealthStatus.PROGRESSING,
            f"Waiting for rollout to finish: {available} of {updated} updated replicas are "
            "available...",
        )
    return Health(HealthStatus.HEALTHY)


def _stateful_set(obj: dict[str, Any]) -> Health:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    generation = _dict(obj.get("metadata")).get("generation", 0)
    if generation > status.get("observedGeneration", 0):
        return Health(
            HealthStatus.PROGRESSING, "Waiting for statefulset spec update to be observed..."
        )
    wanted = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    if ready < wanted:
        return Health(HealthStatus.PROGRESSING, f"Waiting for {wanted - ready} pods to be ready...")
    return Health(HealthStatus.HEALTHY)


_BAD_WAIT = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def _pod(obj: dict[str, Any]) -> Health:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    statuses = [
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ]
    for cs in statuses:
        waiting = _dict(_dict(cs.get("state")).get("waiting"))
        if waiting.get("reason") in _BAD_WAIT:
            message = waiting.get("message") or waiting["reason"]
            return Health(HealthStatus.DEGRADED, f"container {cs.get('name')}: {message}")
    phase = status.get("phase")
    if phase == "Succeeded":
        return Health(HealthStatus.HEALTHY, status.get("message", ""))
    if phase == "Failed":
        return Health(HealthStatus.DEGRADED, status.get("message") or "the pod failed")
    if phase == "Running":
        if spec.get("restartPolicy", "Always") == "Always":
            ready = _condition(status, "Ready")
            if ready is not None and ready.get("status") == "True":
                return Health(HealthStatus.HEALTHY)
            return Health(HealthStatus.PROGRESSING, "waiting for the pod to be ready")
        return Health(HealthStatus.PROGRESSING, "the pod is running")
    if phase == "Pending":
        return Health(HealthStatus.PROGRESSING, status.get("message", "the pod is pending"))
    return Health(HealthStatus.UNKNOWN, status.get("message", "the pod's phase is unknown"))


def _job(obj: dict[str, Any]) -> Health:
    status = _dict(obj.get("status"))
    for cond in status.get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Failed":
            return Health(HealthStatus.DEGRADED, cond.get("message", "the job failed"))
        if cond.get("type") == "Complete":
            return Health(HealthStatus.HEALTHY, cond.get("message", ""))
        if cond.get("type") == "Suspended":
            return Health(HealthStatus.SUSPENDED, cond.get("message", "the job is suspended"))
    if _dict(obj.get("spec")).get("suspend"):
        return Health(HealthStatus.SUSPENDED, "the job is suspended")
    return Health(HealthStatus.PROGRESSING, "the job is running")


def _pvc(obj: dict[str, Any]) -> Health:
    phase = _dict(obj.get("status")).get("phase")
    if phase == "Lost":
        return Health(HealthStatus.DEGRADED, "the claim lost its volume")
    if phase == "Bound":
        return Health(HealthStatus.HEALTHY)
    return Health(HealthStatus.PROGRESSING, "waiting for the claim to be bound")


def _service(obj: dict[str, Any]) -> Health:
    if _dict(obj.get("spec")).get("type") == "LoadBalancer":
        ingress = _dict(_dict(obj.get("status")).get("loadBalancer")).get("ingress")
        if not ingress:
            return Health(HealthStatus.PROGRESSING, "waiting for the load balancer")
    return Health(HealthStatus.HEALTHY)


def _namespace(obj: dict[str, Any]) -> Health:
    if _dict(obj.get("status")).get("phase") == "Terminating":
        return Health(HealthStatus.PROGRESSING, "the namespace is being deleted")
    return Health(HealthStatus.HEALTHY)


def _job_repository(obj: dict[str, Any]) -> Health:
    health = _dict(_dict(obj.get("status")).get("health"))
    try:
        return Health(HealthStatus(health.get("status", "")), health.get("message", ""))
    except ValueError:
        return Health(HealthStatus.PROGRESSING, "waiting for the reconciler")


def _healthy(obj: dict[str, Any]) -> Health:
    return Health(HealthStatus.HEALTHY)


_CHECKS: dict[tuple[str, str], Callable[[dict[str, Any]], Health]] = {
    **{(policies.GROUP, kind): _training_job for kind in policies.KINDS},
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _stateful_set,
    ("", "Pod"): _pod,
    ("batch", "Job"): _job,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "Service"): _service,
    ("", "Namespace"): _namespace,
    ("", "ConfigMap"): _healthy,
    ("", "Secret"): _healthy,
    (names.GROUP, names.KIND): _job_repository,
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def _condition_message(status: dict[str, Any], type_: str | None = None) -> str | None:
    """The message of the True condition of `type_` (the one explaining the phase), else of
    the newest True condition (a later one in the list wins a tie of timestamps)."""
    conds = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    true = [c for c in conds if c.get("status") == "True" and c.get("message")]
    matching = [c for c in true if type_ is not None and c.get("type") == type_]
    if matching:
        return str(matching[-1]["message"])
    if not true:
        return None
    newest = max(enumerate(true), key=lambda ic: (str(ic[1].get("lastTransitionTime", "")), ic[0]))
    return str(newest[1]["message"])
