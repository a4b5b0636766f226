"""The `.status` of a JobRepository, built from a comparison and an operation (pure).

Every field `gitops/engine/crd.py` defines, in the shape of an Argo CD Application's status:
`sync`, `health`, `operationState` (with `syncResult.resources`), `resources` (file and line
included), `history` (the last 10 operations that applied a new revision), `conditions`
(ComparisonError while Git or `path` cannot be read) and `reconciledAt`.

Bounded at any repository size (etcd refuses a request over 1.5 MiB, so a status that grows
with the repository would fail to be written forever): `resources` lists every resource while
there are at most `RESOURCE_LIMIT` of them within `LIST_BUDGET` bytes; above that, only those
not Synced+Healthy (the ones someone needs to look at), up to the same limits; and
`summary` always counts them all (`{total, listed, sync: {Synced: n, …}, health: {…}}`).
`operationState.syncResult.resources` is bounded the same way (only failures) with its own
`total`; messages are cut at `MESSAGE_LIMIT` characters. The whole list is served by the HTTP
API from the reconciler's memory (`resource_entries`, `gitops.runtime.manager`).

A repository that cannot be fetched keeps its last synced state: `with_condition` changes only
the conditions (and `reconciledAt`), so `sync`, `health`, `resources` and `history` stay what
the last successful comparison wrote.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gitops.engine.compare import Comparison, ResourceState
from gitops.engine.records import FAILED, Commit, Outcome

__all__ = [
    "COMPARISON_ERROR",
    "ERROR_CONDITIONS",
    "HISTORY_LIMIT",
    "KINDS_LIMIT",
    "LIST_BUDGET",
    "MESSAGE_LIMIT",
    "RESOURCE_LIMIT",
    "SYNC_ERROR",
    "Operation",
    "applied_kinds",
    "bounded",
    "build",
    "last_synced_revision",
    "resource_entries",
    "summary",
    "timestamp",
    "with_condition",
    "with_operation_error",
    "without_condition",
]

HISTORY_LIMIT = 10
RESOURCE_LIMIT = 500
"""Entries at most in `resources` (and in `operationState.syncResult.resources`)."""
LIST_BUDGET = 256 * 1024
"""Bytes (as JSON) at most of each of those two lists: with the rest, well under 1 MiB."""
KINDS_LIMIT = 256
"""Kinds at most in `appliedKinds` (the CRD's maxItems)."""
MESSAGE_LIMIT = 1024
"""Characters kept of one resource's message in the status (the API has them whole)."""
COMPARISON_ERROR = "ComparisonError"
SYNC_ERROR = "SyncError"
ERROR_CONDITIONS = (COMPARISON_ERROR, SYNC_ERROR)
"""Conditions a successful round removes."""


@dataclass(frozen=True)
class Operation:
    """One sync operation: what was applied, when, and how it ended."""

    revision: str
    commit: Commit | None
    started: datetime
    finished: datetime
    outcomes: tuple[Outcome, ...]
    phase: str
    """Succeeded, Failed or Error."""
    message: str
    new_revision: bool
    """Whether it applied a revision other than the last one in history (a history entry)."""


def timestamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(
    old: dict[str, Any],
    comparison: Comparison,
    revision: str,
    now: datetime,
    operation: Operation | None = None,
    kinds: Iterable[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The next status: the comparison's sync and health, the operation (or the last one kept),
    history with the operation appended when it applied a new revision, conditions without
    ComparisonError; `appliedKinds` from `kinds` ((apiVersion, kind) pairs) when given."""
    status = copy.deepcopy(old)
    for type_ in ERROR_CONDITIONS:
        status = without_condition(status, type_)
    repo_health = comparison.health
    status["sync"] = {
        "status": "Synced" if comparison.synced else "OutOfSync",
        "revision": revision,
        "shortRevision": revision[:7],
    }
    status["health"] = {"status": str(repo_health.status), "message": repo_health.message}
    entries = resource_entries(comparison)
    status["resources"] = bounded(entries, _needs_attention)
    status["summary"] = summary(entries, len(status["resources"]))
    if kinds is not None:
        status["appliedKinds"] = [
            {"apiVersion": a, "kind": k} for a, k in sorted(set(kinds))[:KINDS_LIMIT]
        ]
    if operation is not None:
        status["operationState"] = _operation(operation)
        if operation.new_revision:
            history = list(status.get("history") or [])
            history.append(_history(operation))
            status["history"] = history[-HISTORY_LIMIT:]
    status["reconciledAt"] = timestamp(now)
    return status


def with_condition(
    old: dict[str, Any], type_: str, reason: str, message: str, now: datetime
) -> dict[str, Any]:
    """`old` with condition `type_` True (lastTransitionTime kept when it already was).

    A repository never compared yet (no `sync`) gets sync and health Unknown, the health
    message `message`, so list views show the problem; otherwise the last state is kept."""
    status = copy.deepcopy(old)
    if "sync" not in status:
        status["sync"] = {"status": "Unknown"}
        status["health"] = {"status": "Unknown", "message": message}
    elif (status.get("sync") or {}).get("status") == "Unknown":
        status["health"] = {"status": "Unknown", "message": message}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    previous = next((c for c in old.get("conditions") or [] if c.get("type") == type_), None)
    since = (
        previous.get("lastTransitionTime")
        if previous and previous.get("status") == "True"
        else None
    )
    conditions.append(
        {
            "type": type_,
            "status": "True",
            "reason": reason,
            "message": _text(message, 4 * MESSAGE_LIMIT),
            "lastTransitionTime": since or timestamp(now),
        }
    )
    status["conditions"] = conditions
    status["reconciledAt"] = timestamp(now)
    return status


def with_operation_error(
    old: dict[str, Any], revision: str, message: str, started: datetime, now: datetime
) -> dict[str, Any]:
    """`old` with an operationState in phase Error (a requested sync that could not start)."""
    status = copy.deepcopy(old)
    status["operationState"] = {
        "phase": "Error",
        "message": _text(message, 4 * MESSAGE_LIMIT),
        "startedAt": timestamp(started),
        "finishedAt": timestamp(now),
        "syncResult": {"revision": revision, "resources": []},
    }
    return status


def applied_kinds(status: dict[str, Any]) -> set[tuple[str, str]]:
    """The (apiVersion, kind) pairs of `appliedKinds` (a restarted reconciler searches them for
    prune candidates: the objects of a kind no longer in Git are still found)."""
    out = set()
    for item in status.get("appliedKinds") or []:
        if isinstance(item, dict) and item.get("apiVersion") and item.get("kind"):
            out.add((str(item["apiVersion"]), str(item["kind"])))
    return out


def last_synced_revision(status: dict[str, Any]) -> str | None:
    """The revision the last sync applied, as recorded: the newest history entry, else the
    operation's (a restarted reconciler starts from it)."""
    history = status.get("history") or []
    if history and isinstance(history[-1], dict) and history[-1].get("revision"):
        return str(history[-1]["revision"])
    op = status.get("operationState") or {}
    revision = (op.get("syncResult") or {}).get("revision")
    if op.get("phase") in ("Succeeded", "Failed") and revision:
        return str(revision)
    return None


def without_condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    return status


def resource_entries(comparison: Comparison) -> list[dict[str, Any]]:
    """Every resource of `comparison` as a status entry (the whole list, unbounded)."""
    return [_resource(r) for r in comparison.resources]


def bounded(
    entries: Sequence[dict[str, Any]],
    important: Callable[[dict[str, Any]], bool],
    *,
    limit: int = RESOURCE_LIMIT,
    budget: int = LIST_BUDGET,
) -> list[dict[str, Any]]:
    """`entries` (messages cut at MESSAGE_LIMIT) when all fit in `limit` entries and `budget`
    bytes of JSON; else only the `important` ones, in their order, until either limit is
    reached (`summary` counts the others)."""
    cut = [_cut(e) for e in entries]
    sizes = [len(json.dumps(e, separators=(",", ":"))) + 1 for e in cut]
    if len(cut) <= limit and sum(sizes) <= budget:
        return cut
    out: list[dict[str, Any]] = []
    used = 0
    for entry, size in zip(cut, sizes, strict=True):
        if not important(entry):
            continue
        if len(out) >= limit or used + size > budget:
            break
        out.append(entry)
        used += size
    return out


def summary(entries: Sequence[dict[str, Any]], listed: int) -> dict[str, Any]:
    """How many resources there are, how many `resources` lists, and how many per sync and
    per health status."""
    sync: dict[str, int] = {}
    health: dict[str, int] = {}
    for e in entries:
        sync[str(e.get("status"))] = sync.get(str(e.get("status")), 0) + 1
        if e.get("health"):
            health[str(e["health"])] = health.get(str(e["health"]), 0) + 1
    return {"total": len(entries), "listed": listed, "sync": sync, "health": health}


def _needs_attention(entry: dict[str, Any]) -> bool:
    return entry.get("status") != "Synced" or entry.get("health") not in (None, "Healthy")


def _failed(entry: dict[str, Any]) -> bool:
    return entry.get("status") == FAILED


def _cut(entry: dict[str, Any]) -> dict[str, Any]:
    message = entry.get("message")
    if isinstance(message, str) and len(message) > MESSAGE_LIMIT:
        return {**entry, "message": _text(message)}
    return entry


def _text(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _resource(r: ResourceState) -> dict[str, Any]:
    key = r.key
    out: dict[str, Any] = {
        "group": key.group if key else "",
        "kind": key.kind if key else "",
        "namespace": key.namespace if key else "",
        "name": key.name if key else "",
        "status": r.status,
    }
    if r.health is not None:
        out["health"] = str(r.health.status)
    message = r.message or (r.health.message if r.health else "")
    if message:
        out["message"] = message
    if r.file:
        out["file"] = r.file
        out["line"] = r.line
    return out


def _operation(op: Operation) -> dict[str, Any]:
    return {
        "phase": op.phase,
        "message": _text(op.message, 4 * MESSAGE_LIMIT),
        "startedAt": timestamp(op.started),
        "finishedAt": timestamp(op.finished),
        "syncResult": {
            "revision": op.revision,
            "resources": bounded(_results(op.outcomes), _failed),
            "total": len(op.outcomes),
        },
    }


def _results(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [
        {
            "group": o.key.group,
            "kind": o.key.kind,
            "namespace": o.key.namespace,
            "name": o.key.name,
            "status": o.status,
            "message": o.message,
        }
        for o in outcomes
    ]


def _history(op: Operation) -> dict[str, Any]:
    commit = op.commit
    author = f"{commit.author_name} <{commit.author_email}>" if commit else ""
    return {
        "revision": op.revision,
        "author": author,
        "message": _text(commit.subject) if commit else "",
        "deployedAt": timestamp(op.finished),
        "result": op.phase,
    }
