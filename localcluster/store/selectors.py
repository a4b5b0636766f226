"""Label and field selectors: parsing (`?labelSelector=`, `?fieldSelector=`) and matching.

Pure functions. Label selectors support the full string grammar clients send: `k`, `!k`,
`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n` (parsed by
`labelselector`, with kube-apiserver's error texts). Field selectors support
`=`, `==`, `!=` over the fields the real server indexes for each kind; any other field is
refused with the server's message, as kubectl users expect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from localcluster.store import labelselector

__all__ = [
    "FieldRequirement",
    "LabelRequirement",
    "Selector",
    "SelectorError",
    "field_value",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector string that does not parse or names an unsupported field."""


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # in, notin, exists, !, gt, lt (=, == are "in"; != is "notin")
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if not present:
            return False
        try:
            number, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == "gt" else number < bound


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


@dataclass(frozen=True)
class Selector:
    """A parsed label selector and field selector; empty ones match everything."""

    labels: tuple[LabelRequirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.labels and not self.fields

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.labels:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if not all(r.matches(labels) for r in self.labels):
                return False
        for req in self.fields:
            equal = field_value(obj, req.field) == req.value
            if equal != (req.op == "="):
                return False
        return True


_OPS = {"=": "in", "==": "in", "in": "in", "!=": "notin", "notin": "notin", ">": "gt", "<": "lt"}


def parse_label_selector(text: str | None) -> tuple[LabelRequirement, ...]:
    """The requirements of `?labelSelector=` (labelselector.parse: apimachinery's grammar and
    error texts)."""
    try:
        parsed = labelselector.parse(text or "")
    except labelselector.LabelSelectorError as e:
        raise SelectorError(str(e)) from None
    return tuple(LabelRequirement(p.key, _OPS.get(p.op, p.op), p.values) for p in parsed)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


# Field selectors each kind supports (besides metadata.name and metadata.namespace).
_FIELDS: dict[str, tuple[str, ...]] = {
    "/pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "/events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "events.k8s.io/events": (
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "reason",
        "reportingController",
        "type",
    ),
    "/secrets": ("type",),
    "/namespaces": ("status.phase",),
    "/nodes": ("spec.unschedulable",),
    "/replicationcontrollers": ("status.replicas",),
}

_ALIASES: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "source": lambda o: (o.get("source") or {}).get("component"),
}


def parse_field_selector(
    text: str | None, resource: str, extra: tuple[str, ...] = (), *, custom: bool = False
) -> tuple[FieldRequirement, ...]:
    """Parse `a=b,c!=d` for `resource` ("group/plural"); unknown fields raise SelectorError.

    `extra`: further selectable fields (a CRD version's `selectableFields`); `custom`: a
    CRD-served resource. Kinds with their own field-label conversion (those of `_FIELDS`,
    services, custom resources without selectable fields) word an unknown field `field label
    not supported: f`, as kube-apiserver v1.32 does; the others (ConfigMaps, Deployments, …)
    list the fields they support.
    """
    allowed = ("metadata.name", "metadata.namespace", *_FIELDS.get(resource, ()), *extra)
    out: list[FieldRequirement] = []
    for part in _split_top(text or ""):
        m = re.fullmatch(r"\s*([^!=\s]+)\s*(==|!=|=)\s*(.*?)\s*", part)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.groups()
        if field not in allowed:
            if (custom and not extra) or resource in _FIELDS or resource == "/services":
                raise SelectorError(f"field label not supported: {field}")
            quoted = ", ".join(f'"{f}"' for f in allowed)
            raise SelectorError(f'"{field}" is not a known field selector: only {quoted}')
        out.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
    return tuple(out)


def field_value(obj: Mapping[str, Any], field: str) -> str:
    """The string a field selector compares against ("" when absent)."""
    if field in _ALIASES:
        value = _ALIASES[field](obj)
    else:
        value = obj
        for part in field.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
