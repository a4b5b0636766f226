"""Small pure formatters shared by every page: badges, short SHAs, times and ages.

Why one module: the three pages show the same facts (a sync status, a phase, "3m ago") and a
user compares them across pages, so each is spelled once. No clock reads: `now` is passed in.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from policies.durations import human_duration

__all__ = [
    "HEALTH_STATUSES",
    "PHASES",
    "SYNC_STATUSES",
    "age",
    "ago",
    "as_dict",
    "as_list",
    "condition_tone",
    "health_badge",
    "parse_time",
    "phase_badge",
    "short_sha",
    "sync_badge",
    "text",
]

SYNC_STATUSES = ("Synced", "OutOfSync", "Unknown")
HEALTH_STATUSES = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")
PHASES = (
    "Pending",
    "Running",
    "Paused",
    "Resuming",
    "Succeeded",
    "Failed",
    "Unknown",
)
"""Job phases in the order a phase filter offers them (others seen in the data are appended)."""

# Each status maps to (tone, icon): the tone picks the Argo CD colour in dashboard.css, the
# icon one of the shapes in templates/_icons.html.
_SYNC = {
    "Synced": ("ok", "check"),
    "OutOfSync": ("warn", "arrow-up"),
    "Unknown": ("unknown", "question"),
}
_HEALTH = {
    "Healthy": ("ok", "heart"),
    "Progressing": ("running", "spinner"),
    "Degraded": ("failed", "broken-heart"),
    "Suspended": ("suspended", "pause"),
    "Missing": ("warn", "ghost"),
    "Unknown": ("unknown", "question"),
}
_PHASE = {
    "Succeeded": ("ok", "check"),
    "Running": ("running", "spinner"),
    "Pending": ("unknown", "clock"),
    "Creating": ("unknown", "clock"),
    "Resuming": ("running", "spinner"),
    "Paused": ("suspended", "pause"),
    "Failed": ("failed", "cross"),
    "Deleted": ("unknown", "cross"),
}


# What a condition that is True means, by type: done (ok), trouble (failed, warn), a pause.
# Any other True condition (Running, Created, Initialized, …) is news without a verdict, and a
# False one is not in effect: neither is coloured green just for saying "True".
_CONDITION_TONES = {
    "Succeeded": "ok",
    "Completed": "ok",
    "Failed": "failed",
    "ComparisonError": "failed",
    "SyncError": "failed",
    "ReplicaFailure": "warn",
    "Paused": "suspended",
}


def condition_tone(kind: Any, status: Any) -> str:
    """The colour of a condition by what it means: `ok`, `failed`, `warn`, `suspended`,
    `neutral` (True, no verdict) or `muted` (False or Unknown: not in effect)."""
    if status != "True":
        return "muted"
    return _CONDITION_TONES.get(kind, "neutral") if isinstance(kind, str) else "neutral"


def sync_badge(status: Any) -> dict[str, str]:
    """`{status, tone, icon}` for a sync status; anything unrecognised is `Unknown`."""
    value = status if isinstance(status, str) and status in _SYNC else "Unknown"
    tone, icon = _SYNC[value]
    return {"status": value, "tone": tone, "icon": icon}


def health_badge(status: Any) -> dict[str, str]:
    """`{status, tone, icon}` for a health status; anything unrecognised is `Unknown`."""
    value = status if isinstance(status, str) and status in _HEALTH else "Unknown"
    tone, icon = _HEALTH[value]
    return {"status": value, "tone": tone, "icon": icon}


def phase_badge(phase: Any) -> dict[str, str]:
    """`{status, tone, icon}` for a job or replica phase; none yet reads `Unknown`."""
    value = phase if isinstance(phase, str) and phase else "Unknown"
    tone, icon = _PHASE.get(value, ("unknown", "question"))
    return {"status": value, "tone": tone, "icon": icon}


def short_sha(sha: Any) -> str:
    """The first 7 characters of a commit SHA ("" for none)."""
    return sha[:7] if isinstance(sha, str) else ""


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time as the API server writes it; None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def age(value: Any, now: datetime) -> str:
    """How long ago `value` (RFC 3339) was, kubectl-style (`3h4m`); "" when it is not a time."""
    moment = parse_time(value)
    if moment is None:
        return ""
    return human_duration(max(0.0, (now - moment).total_seconds()))


def ago(value: Any, now: datetime) -> str:
    """`3m ago` (`just now` under a second); "" when `value` is not a time."""
    moment = parse_time(value)
    if moment is None:
        return ""
    seconds = (now - moment).total_seconds()
    return "just now" if seconds < 1 else f"{human_duration(seconds)} ago"


def text(value: Any) -> str:
    """A value as display text: strings as they are, None as "", others through str()."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
