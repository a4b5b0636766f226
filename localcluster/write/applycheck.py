"""Server-side apply's schema check of an applied configuration of a built-in kind.

kube-apiserver turns the configuration into a typed value before merging it: a field the
kind's schema does not declare fails that step whatever `fieldValidation` says, with a 500 and
no reason (`Error from server: failed to create typed patch object (ns/name; apps/v1,
Kind=Deployment): .spec.template.spec.containers[name="c"].bogus: field not declared in
schema`). Paths are structured-merge-diff's: a leading dot, list items by their `name` key
when they have one, else by index. Custom resources are pruned instead (crdschema).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema import crdschema

__all__ = ["check_applied_fields"]

_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
_UNKNOWN = re.compile(r'^unknown field "(.*)"$')


def check_applied_fields(
    info: ResourceInfo, applied: dict[str, Any], namespace: str, name: str
) -> None:
    """Raise the 500 above for the first undeclared field of `applied` (built-ins only)."""
    if info.is_custom:
        return
    problems = crdschema.validate_builtin(info, copy.deepcopy(applied), field_validation="Warn")
    for problem in problems:
        m = _UNKNOWN.match(problem)
        if m is None:
            continue
        group_version = f"{info.group}/{info.version}" if info.group else f"/{info.version}"
        key = f"{namespace if info.namespaced else ''}/{name}"
        raise ApiError(
            500,
            "",
            f"failed to create typed patch object ({key}; {group_version}, Kind={info.kind}): "
            f"{_smd_path(applied, m.group(1))}: field not declared in schema",
        )


def _smd_path(obj: Any, path: str) -> str:
    out = ""
    node = obj
    for field, index in _TOKEN.findall(path):
        if field:
            out += f".{field}"
            node = node.get(field) if isinstance(node, dict) else None
            continue
        item = None
        if index.isdigit() and isinstance(node, list) and int(index) < len(node):
            item = node[int(index)]
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out += f'[name="{item["name"]}"]'
        else:
            out += f"[{index}]"
        node = item
    return out
