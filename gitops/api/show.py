"""What the GitOps API shows of an object (pure): a JobRepository with URL credentials masked,
a training job as one `/api/v1/jobs` row. The dashboard shows the same, so both import these."""

from __future__ import annotations

from typing import Any

from gitops.engine import names, redact

__all__ = ["FINISHED_PHASES", "finished_replicas", "job_row", "shown_repository"]


def finished_replicas(tasks: Any) -> str:
    """READY of a finished job: ready counts say nothing once every pod is gone (`0/4`), so
    like `kubectl get jobs`' COMPLETIONS it counts the replicas that succeeded out of all
    (`3/4 succeeded, 1 failed`, from `status.tasks[].replicas[].phase`); `-` when the status
    lists no replica."""
    phases = [_dict(r).get("phase") for t in _list(tasks) for r in _list(_dict(t).get("replicas"))]
    if not phases:
        return "-"
    failed = phases.count("Failed")
    shown = f"{phases.count('Succeeded')}/{len(phases)} succeeded"
    return f"{shown}, {failed} failed" if failed else shown


FINISHED_PHASES = ("Succeeded", "Failed", "Completed")
"""Phases after which a job has no replica running: READY counts how its replicas ended."""


def job_row(job: dict[str, Any]) -> dict[str, Any]:
    """One training job as `/api/v1/jobs` lists it."""
    meta = _dict(job.get("metadata"))
    status = _dict(job.get("status"))
    replicas = status.get("readyReplicas")
    if not isinstance(replicas, str) or not replicas:
        specs = [
            s for s in _list(_dict(job.get("spec")).get("replicaSpecs")) if isinstance(s, dict)
        ]
        total = sum(s["replicas"] if isinstance(s.get("replicas"), int) else 1 for s in specs)
        ready = sum(
            1
            for task in _list(status.get("tasks"))
            for replica in _list(_dict(task).get("replicas"))
            if _dict(replica).get("phase") == "Running"
        )
        replicas = f"{ready}/{total}"
    if status.get("phase") in FINISHED_PHASES:
        replicas = finished_replicas(status.get("tasks"))
    restarts = status.get("backoffCount")
    repository = _dict(meta.get("annotations")).get(names.REPOSITORY_ANNOTATION)
    return {
        "kind": job.get("kind"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "phase": status.get("phase") or None,
        "replicas": replicas,
        "restarts": restarts if isinstance(restarts, int) else 0,
        "repository": repository if isinstance(repository, str) and repository else None,
        "createdAt": meta.get("creationTimestamp"),
    }


def shown_repository(obj: dict[str, Any]) -> dict[str, Any]:
    """A JobRepository as the API shows it: URL credentials (userinfo, `?private_token=`, …)
    masked everywhere (`gitops.engine.redact`)."""
    out: dict[str, Any] = redact.redact_value(obj)
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
