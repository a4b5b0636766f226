"""The built-in types' schemas, as kubernetes-validate ships them (Kubernetes v1.32), and their
names: the JSON-schema definitions (`$defs`, loose or strict), the definition name of a kind
(`io.k8s.api.core.v1.Pod`; for a custom resource, its reversed group with version and kind,
as the real server names it), and a definition in OpenAPI 3.0 form with everything it
references (`closure`): `#/components/schemas/...` or `#/definitions/...` references, single
`type`s, `int-or-string` as kube-apiserver publishes it.

The OpenAPI documents (`openapi.py`) are built from these; schema checks of built-in objects
(`crdschema.py`, `schemawalk.py`) read the definitions directly. Pure, memoised.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib import resources as importlib_resources
from typing import Any

from localcluster.api.types import ResourceInfo

__all__ = ["SCHEMA_VERSION", "builtin_definitions", "closure", "definition_name", "refs"]

SCHEMA_VERSION = "v1.32.0"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


@functools.cache
def builtin_definitions(strict: bool = False) -> dict[str, Any]:
    """The JSON-schema definitions of every built-in type (`$defs`), as kubernetes-validate
    ships them; `strict` adds `additionalProperties: false` to every struct."""
    folder = f"{SCHEMA_VERSION}-local-strict" if strict else f"{SCHEMA_VERSION}-local"
    ref = (
        importlib_resources.files("kubernetes_validate")
        .joinpath("kubernetes-json-schema")
        .joinpath(folder)
        .joinpath("_definitions.json")
    )
    defs: dict[str, Any] = json.loads(ref.read_text())["$defs"]
    return defs


@functools.cache
def _gvk_index() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in builtin_definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            out.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return out


def definition_name(info: ResourceInfo, *, list_kind: bool = False) -> str:
    """The component name of a kind: the built-in definition name, or for custom resources the
    reversed group followed by version and kind (as the real server names them)."""
    kind = (info.list_kind or f"{info.kind}List") if list_kind else info.kind
    if not info.is_custom:
        found = _gvk_index().get((info.group, info.version, kind))
        if found:
            return found
    group = ".".join(reversed(info.group.split("."))) if info.group else "io.k8s.api.core"
    return f"{group}.{info.version}.{kind}"


def _convert(node: Any, prefix: str) -> Any:
    """A kubernetes-validate JSON schema node in OpenAPI form (refs under `prefix`)."""
    if isinstance(node, list):
        return [_convert(n, prefix) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out["type"] = types[0] if len(types) == 1 else value
        elif key == "$ref":
            continue
        elif key == "properties":
            out[key] = {k: _convert(_without_kind_enum(k, v), prefix) for k, v in value.items()}
        elif key == "patternProperties":
            out[key] = {k: _convert(v, prefix) for k, v in value.items()}
        else:
            out[key] = _convert(value, prefix)
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = prefix + ref.rsplit("/", 1)[-1]
        # The real documents wrap a reference that has siblings in allOf.
        out = {"allOf": [{"$ref": target}], **out} if out else {"$ref": target}
    return out


def _without_kind_enum(name: str, node: Any) -> Any:
    """kubernetes-validate pins `apiVersion` and `kind` with an `enum`; the real documents do
    not (kubectl explain would print `enum: v1`)."""
    if name in ("apiVersion", "kind") and isinstance(node, dict) and "enum" in node:
        return {k: v for k, v in node.items() if k != "enum"}
    return node


@functools.cache
def _converted(name: str, prefix: str) -> dict[str, Any]:
    if name == _INT_OR_STRING:
        # As kube-apiserver publishes it (no `type`: kubectl explain then prints the
        # referencing field as <IntOrString>, not <string>).
        return {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}
    if name == _QUANTITY:
        return {"oneOf": [{"type": "string"}, {"type": "number"}]}
    result: dict[str, Any] = _convert(builtin_definitions()[name], prefix)
    return result


def refs(node: Any) -> Iterable[str]:
    """The definition names `node` references, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def closure(roots: Iterable[str], prefix: str, into: dict[str, Any]) -> None:
    """Add to `into` the built-in definitions `roots` name and all they reference, in OpenAPI
    form with references under `prefix`; names already in `into` are kept as they are."""
    pending = [r for r in roots if r not in into]
    defs = builtin_definitions()
    while pending:
        name = pending.pop()
        if name in into or name not in defs:
            continue
        into[name] = _converted(name, prefix)
        pending.extend(r for r in refs(into[name]) if r not in into)
