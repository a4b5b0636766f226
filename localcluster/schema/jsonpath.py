"""The JSONPath subset of CRD printer columns: `.a.b`, `[n]`, `[*]`, `['key']`, `[?(@.f=="v")]`.

Two readers share it: CRD validation (is a column's `jsonPath` well-formed?) and the table
printer (which values does it select?). Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["jsonpath_parses", "jsonpath_values"]

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
      | \[(?P<index>-?\d+|\*)\]
      | \[['"](?P<key>[^'"]+)['"]\]
      | \[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*(?P<op>==|!=)\s*(?P<fval>"[^"]*"|'[^']*'|[^)\s]+)\)\]
      | \.\*""",
    re.VERBOSE,
)


def jsonpath_parses(path: str) -> bool:
    """Whether `path` is in the JSONPath subset printer columns support."""
    expr = path.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return False
        pos = m.end()
    return bool(expr)


def jsonpath_values(obj: Any, path: str) -> list[Any]:
    """The values a CRD printer-column JSONPath selects (the subset CRDs use: `.a.b`, `[n]`,
    `[*]`, `['key']`, `[?(@.type=="Ready")]`); `{...}` wrapping is accepted."""
    expr = path.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    if expr.startswith("$"):
        expr = expr[1:]
    current: list[Any] = [obj]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            if m.group("field") is not None:
                if isinstance(value, dict) and m.group("field") in value:
                    nxt.append(value[m.group("field")])
            elif m.group("key") is not None:
                if isinstance(value, dict) and m.group("key") in value:
                    nxt.append(value[m.group("key")])
            elif m.group("index") is not None:
                if not isinstance(value, list):
                    continue
                if m.group("index") == "*":
                    nxt.extend(value)
                else:
                    i = int(m.group("index"))
                    if -len(value) <= i < len(value):
                        nxt.append(value[i])
            elif m.group("fpath") is not None:
                items = value if isinstance(value, list) else []
                want = m.group("fval").strip("'\"")
                for item in items:
                    got = _dig(item, m.group("fpath").split("."))
                    text = got if isinstance(got, str) else json.dumps(got)
                    if (text == want) == (m.group("op") == "=="):
                        nxt.append(item)
            elif isinstance(value, dict):
                nxt.extend(value.values())
            elif isinstance(value, list):
                nxt.extend(value)
        current = nxt
    return current


def _dig(obj: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
