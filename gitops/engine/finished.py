"""Training jobs run to completion: a finished job deleted by hand is not run again while its
manifest is unchanged (pure).

Git says which jobs should exist; for a Deployment that means "keep it running", but a training
job that has Succeeded (or Failed) has done what its manifest asked. When someone deletes such a
job (to free its pods' storage, or because its result is in), self-heal must not create it again
and train once more. So a repository remembers, per job, that it finished under a given manifest
(`Finished`: its phase and a digest of the object applied): while Git holds the same manifest,
the missing job is Synced ("finished and deleted, not run again"); a changed manifest is a new
run and is applied. `spec.syncPolicy.rerunFinishedJobs: true` turns this off (Argo CD and Flux
recreate whatever is missing).

The records live in the JobRepository's `status.finishedJobs` (at most `LIMIT`, jobs already
deleted first), so a restart or a new leader keeps them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import policies
from gitops.engine import health
from gitops.engine.compare import SYNCED, Comparison, ResourceState
from gitops.engine.pairing import ResourceKey

__all__ = [
    "LIMIT",
    "Finished",
    "digest",
    "from_status",
    "keep_deleted",
    "phase_of",
    "record",
    "rerun_finished",
    "settle",
    "to_status",
    "with_records",
]

LIMIT = 1000
"""Finished jobs a status remembers; beyond it the ones still live are dropped first (their
record is made again from the live job while it exists)."""
_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Finished:
    phase: str
    """Succeeded or Failed."""
    manifest: str
    """`digest` of the object that was applied when the job finished."""


def rerun_finished(repository: Mapping[str, Any]) -> bool:
    """`spec.syncPolicy.rerunFinishedJobs` of a JobRepository (false unless true)."""
    policy = ((repository.get("spec") or {}).get("syncPolicy")) or {}
    return isinstance(policy, dict) and policy.get("rerunFinishedJobs") is True


def digest(desired: Mapping[str, Any]) -> str:
    """A short fingerprint of an object as applied (its status ignored)."""
    body = {k: v for k, v in desired.items() if k != "status"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def phase_of(live: Mapping[str, Any] | None) -> str | None:
    """Succeeded or Failed for a finished training job, else None."""
    if not live or not _training_job(live):
        return None
    phase = (live.get("status") or {}).get("phase")
    return phase if phase in _FINISHED else None


def keep_deleted(
    comparison: Comparison, known: Mapping[ResourceKey, Finished], *, rerun: bool
) -> Comparison:
    """`comparison` with every job that finished under its current manifest and has been
    deleted since marked Synced — not to be created again — unless `rerun`."""
    if rerun or not known:
        return comparison
    out: list[ResourceState] = []
    changed = False
    for r in comparison.resources:
        done = known.get(r.key) if r.key is not None else None
        if (
            done is not None
            and r.live is None
            and r.desired is not None
            and r.error is None
            and done.manifest == digest(r.desired)
        ):
            r = replace(
                r,
                status=SYNCED,
                health=_health(done),
                message=f"finished ({done.phase}) and deleted: not run again while its manifest "
                "is unchanged (spec.syncPolicy.rerunFinishedJobs: true runs it again)",
                diff=None,
            )
            changed = True
        out.append(r)
    return replace(comparison, resources=tuple(out)) if changed else comparison


def record(
    comparison: Comparison, known: Mapping[ResourceKey, Finished]
) -> dict[ResourceKey, Finished]:
    """What the repository remembers after `comparison`: every training job that finished in
    sync with Git, and every remembered one still deleted under the same manifest."""
    out: dict[ResourceKey, Finished] = {}
    for r in comparison.resources:
        if r.key is None or r.desired is None or r.error is not None:
            continue
        phase = phase_of(r.live)
        if phase is not None and r.status == SYNCED:
            out[r.key] = Finished(phase, digest(r.desired))
            continue
        done = known.get(r.key)
        if done is not None and r.live is None and done.manifest == digest(r.desired):
            out[r.key] = done
    return out


def settle(
    comparison: Comparison, known: Mapping[ResourceKey, Finished], *, rerun: bool
) -> tuple[Comparison, dict[ResourceKey, Finished]]:
    """`keep_deleted`, then `record` of what it gives: a round's one step for finished jobs."""
    kept = keep_deleted(comparison, known, rerun=rerun)
    return kept, record(kept, known)


def to_status(
    finished: Mapping[ResourceKey, Finished], live: Mapping[ResourceKey, bool]
) -> list[dict[str, Any]]:
    """`status.finishedJobs`: deleted jobs first (only the status remembers them), then the
    live ones (`live[key]`: whether the job exists), each group by key, at most LIMIT."""
    keys = sorted(finished, key=lambda k: (live.get(k, False), k.namespace, k.kind, k.name))
    return [
        {
            "kind": k.kind,
            "namespace": k.namespace,
            "name": k.name,
            "phase": finished[k].phase,
            "manifest": finished[k].manifest,
        }
        for k in keys[:LIMIT]
    ]


def with_records(
    status: dict[str, Any],
    finished: Mapping[ResourceKey, Finished],
    comparison: Comparison,
) -> dict[str, Any]:
    """`status` with `finishedJobs` set to `finished` (removed when there is none)."""
    if not finished:
        status.pop("finishedJobs", None)
        return status
    live = {r.key: r.live is not None for r in comparison.resources if r.key is not None}
    status["finishedJobs"] = to_status(finished, live)
    return status


def from_status(status: Mapping[str, Any] | None) -> dict[ResourceKey, Finished]:
    """The records of `status.finishedJobs` (malformed entries skipped)."""
    out: dict[ResourceKey, Finished] = {}
    entries: Iterable[Any] = (status or {}).get("finishedJobs") or ()
    for e in entries:
        if not isinstance(e, dict):
            continue
        fields = [e.get(f) for f in ("kind", "namespace", "name", "phase", "manifest")]
        if not all(isinstance(v, str) and v for v in fields) or e["phase"] not in _FINISHED:
            continue
        key = ResourceKey(policies.GROUP, e["kind"], e["namespace"], e["name"])
        out[key] = Finished(e["phase"], e["manifest"])
    return out


def _training_job(obj: Mapping[str, Any]) -> bool:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.split("/", 1)[0] == policies.GROUP and obj.get("kind") in policies.KINDS


def _health(done: Finished) -> health.Health:
    if done.phase == "Succeeded":
        return health.Health(health.HealthStatus.HEALTHY, "the job succeeded, then was deleted")
    return health.Health(health.HealthStatus.DEGRADED, "the job failed, then was deleted")
