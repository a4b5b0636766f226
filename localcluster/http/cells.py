"""The cells of server-side tables, rendered as kubectl prints them: ages and durations
(`5m2s`, `2d3h`), RFC 3339 timestamps read leniently, selectors (`app=web,tier in (a,b)`),
`<none>` for an empty value, and the small accessors every printer uses (an object's name,
a nested field by path). Shared by the built-in printers (`printers.py`, `printers_policy.py`)
and `tables.py`. Pure: `now` is a parameter.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from policies.durations import human_duration

__all__ = [
    "age",
    "get",
    "human_duration",
    "label_selector",
    "map_selector",
    "name",
    "or_none",
    "parse_time",
    "since",
]

Obj = dict[str, Any]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (None when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_time(value)


@functools.lru_cache(maxsize=4096)
def _parse_time(value: str) -> datetime | None:
    # Objects created together share timestamps: a cache makes 10k-row tables cheap.
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(value: Any, now: datetime) -> str:
    """The age of a timestamp at `now` (`<unknown>` when it cannot be read)."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def age(obj: Obj, now: datetime) -> str:
    """The AGE cell: how long ago the object was created."""
    return since(obj.get("metadata", {}).get("creationTimestamp"), now)


def name(obj: Obj) -> str:
    """The NAME cell."""
    return str(obj.get("metadata", {}).get("name", ""))


def get(obj: Any, *path: str | int) -> Any:
    """The value at `path` (keys and list indexes), None where the path leads nowhere."""
    cur = obj
    for p in path:
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                return None
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(p)
    return cur


def or_none(value: Any) -> str:
    """The value as text, `<none>` when it is absent or empty."""
    return str(value) if value not in (None, "", []) else "<none>"


def map_selector(sel: dict[str, Any] | None) -> str:
    """A plain label map (a Service's selector) as kubectl prints it, `<none>` when empty."""
    if not sel:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def label_selector(sel: dict[str, Any] | None) -> str:
    """A LabelSelector as kubectl prints it (`app=web,tier in (a,b)`), `<none>` when empty."""
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op = expr.get("operator", "")
        key = expr.get("key", "")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"
