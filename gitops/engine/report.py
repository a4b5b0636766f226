"""How a sync operation is told: its one-line summary, its Events and its log lines (pure but
for the callbacks it is given).

Words: an admission denial (the webhook's, in pre-flight or from the API server) is *denied*
(Event ResourceDenied); any other entry error (an unreadable file, a YAML error, a typo'd
kind, a duplicate) is *invalid* and a failed apply or prune is *failed* (Event
ResourceFailed). Every message starts with the file:line of the entry when it has one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from gitops.engine.records import Outcome
from gitops.engine.status import Operation

__all__ = ["is_denial", "report", "summary"]

DENIAL_MARK = "denied the request"


def is_denial(message: str) -> bool:
    """Whether `message` is an admission webhook's (or policy's) denial."""
    return DENIAL_MARK in message


def summary(outcomes: Sequence[Outcome], entry_errors: Sequence[Outcome]) -> str:
    """`3 applied, 1 pruned, 2 prune skipped: …, 1 denied: jobs/bad.yaml:12: …, 1 invalid: …,
    1 failed: …` (the first of each)."""
    applied = sum(1 for o in outcomes if o.status == "Synced" and o.message != "unchanged")
    pruned = sum(1 for o in outcomes if o.status == "Pruned")
    failed = [o for o in outcomes if o.failed]
    denied = [o for o in failed if is_denial(o.message)]
    invalid = [o for o in entry_errors if not is_denial(o.message)]
    seen = {id(o) for o in denied} | {id(o) for o in invalid}  # not `in` a list: n² at 10,000
    others = [o for o in failed if id(o) not in seen]
    skipped = [o for o in outcomes if o.status == "PruneSkipped"]
    parts = [f"{applied} applied"]
    if pruned:
        parts.append(f"{pruned} pruned")
    if skipped:
        parts.append(f"{len(skipped)} prune skipped: " + _why(skipped[0].message))
    for word, group in (("denied", denied), ("invalid", invalid), ("failed", others)):
        if group:
            more = f" (and {len(group) - 1} more)" if len(group) > 1 else ""
            parts.append(f"{len(group)} {word}: {group[0].message}{more}")
    return ", ".join(parts)


def report(
    obj: dict[str, Any],
    key: str,
    op: Operation,
    emit: Callable[[dict[str, Any], str, str, str], None],
    log: logging.Logger,
) -> None:
    """The Events and log lines of `op` on the JobRepository `obj` (`key`)."""
    short = op.revision[:7]
    verb = "synced" if op.phase == "Succeeded" else "sync failed at"
    log.info("gitops %s: %s %s (%s)", key, verb, short, op.message)
    for o in op.outcomes:
        label = str(o.key).strip()
        prefix = f"{label}: " if label else ""
        if o.status == "Pruned":
            emit(obj, "Normal", "Pruned", f"{prefix}{o.message}")
        elif o.failed:
            denial = is_denial(o.message)
            reason = "ResourceDenied" if denial else "ResourceFailed"
            emit(obj, "Warning", reason, f"{prefix}{o.message}")
            log.info("gitops %s: %s%s", key, f"{label} " if label else "", _verb(denial, o))
        elif o.message not in ("unchanged",):
            log.info("gitops %s: %s %s", key, o.key, o.message)
    if op.phase == "Succeeded":
        emit(obj, "Normal", "SyncSucceeded", f"synced {short}: {op.message}")
    else:
        emit(obj, "Warning", "SyncFailed", f"sync of {short} failed: {op.message}")


def _why(message: str) -> str:
    return message.removeprefix("prune skipped: ")


def _verb(denial: bool, o: Outcome) -> str:
    return f"{'denied' if denial else 'failed'}: {o.message}"
