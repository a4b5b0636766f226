"""Guards that keep a sync from deleting running work by accident (pure).

- **Empty desired state** (Argo CD's `allowEmpty: false`): a comparison in which Git defines no
  object at all — a commit that leaves only a README, a `path` emptied — while this repository
  has applied objects is far more often a mistake than a wish to delete every job. Prune is
  blocked (`Comparison.prune_blocked`) unless `spec.syncPolicy.allowEmpty: true`; the
  operation records PruneSkipped for each object and the repository carries the condition
  PruneSkipped (reason EmptyDesiredState) until Git defines objects again. A `path` that no
  longer exists is a ComparisonError already (the last synced state is kept, nothing pruned).
- **PruneSkipped condition**: whenever prune is blocked (the empty guard, or a file that cannot
  be read) and there is something it would have deleted, the status says so as a condition, so
  `kubectl get jobrepo -o yaml` and the dashboard show why the jobs are still there.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from gitops.engine import status
from gitops.engine.compare import Comparison

__all__ = [
    "EMPTY_REASON",
    "PRUNE_SKIPPED",
    "UNREADABLE_REASON",
    "allow_empty",
    "empty_message",
    "guard_empty",
    "with_prune_condition",
]

PRUNE_SKIPPED = "PruneSkipped"
EMPTY_REASON = "EmptyDesiredState"
UNREADABLE_REASON = "UnreadableFile"


def allow_empty(obj: dict[str, Any]) -> bool:
    """`spec.syncPolicy.allowEmpty` of a JobRepository (false when unset or not a boolean)."""
    spec = obj.get("spec")
    policy = spec.get("syncPolicy") if isinstance(spec, dict) else None
    return isinstance(policy, dict) and policy.get("allowEmpty") is True


def empty_message(path: str, count: int) -> str:
    where = "the repository" if path in ("", ".") else f"path {path}"
    objects = "object" if count == 1 else "objects"
    return (
        f"prune skipped: {where} defines no objects at this revision; {count} {objects} "
        "applied before are kept (set spec.syncPolicy.allowEmpty: true to let an empty "
        "revision prune them)"
    )


def guard_empty(comparison: Comparison, *, allowed: bool, path: str) -> Comparison:
    """`comparison` with prune blocked when Git defines nothing and something would be
    pruned, unless `allowed`."""
    candidates = sum(1 for r in comparison.resources if r.prune)
    if allowed or comparison.prune_blocked or not candidates:
        return comparison
    if any(not r.prune for r in comparison.resources):
        return comparison
    return dataclasses.replace(comparison, prune_blocked=empty_message(path, candidates))


def with_prune_condition(
    old: dict[str, Any], comparison: Comparison, now: datetime
) -> dict[str, Any]:
    """`old` (a status) with the PruneSkipped condition True while prune is blocked and has
    candidates, removed otherwise."""
    blocked = comparison.prune_blocked
    if blocked and any(r.prune for r in comparison.resources):
        reason = EMPTY_REASON if "defines no objects" in blocked else UNREADABLE_REASON
        return status.with_condition(old, PRUNE_SKIPPED, reason, blocked, now)
    return status.without_condition(dict(old), PRUNE_SKIPPED)
