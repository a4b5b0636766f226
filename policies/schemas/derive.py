"""Derive the structural PodTemplateSpec schema from Kubernetes' published definitions.

Kubernetes publishes the OpenAPI definitions of its built-in types; the maintained PyPI package
`kubernetes-validate` ships them as JSON Schema files, one folder per Kubernetes version, with
relative `$ref`s into `_definitions.json`. A CustomResourceDefinition cannot use those schemas
as they are: apiextensions.k8s.io/v1 requires a *structural* schema. This module converts one
definition into that form, so the replica `template` of our CRDs carries the real pod schema
rather than a hand-typed copy:

- every `$ref` is resolved and inlined (the referring site's description wins);
- `type: [X, "null"]` becomes `type: X` (the API server prunes `null` on non-nullable fields,
  which is what the built-in API does with a null: treat it as absent);
- `IntOrString` and `Quantity` (`oneOf` string/integer, string/number) become
  `x-kubernetes-int-or-string: true` with no `type`, as CRDs spell them;
- only keywords an apiextensions `JSONSchemaProps` knows are kept (`x-kubernetes-patch-*`,
  `x-kubernetes-unions` and `x-kubernetes-group-version-kind` are dropped; so is a boolean
  `additionalProperties`, which apiextensions forbids next to `properties`);
- a key of an `x-kubernetes-list-type: map` list must be required or defaulted in a CRD; the
  exported JSON Schema drops the `+default` markers of k8s.io/api, so the few that list-map keys
  rely on (`ContainerPort.protocol: TCP`, `LocalObjectReference.name: ""`) are restored from
  `KNOWN_DEFAULTS`, and derivation fails loudly if a new version adds an unknown one;
- the template's `metadata` keeps only the ObjectMeta fields a pod template uses (the same
  subset controller-gen emits with `generateEmbeddedObjectMeta`, plus `generateName` and
  `creationTimestamp` so the `creationTimestamp: null` that kubectl prints is not unknown).

This runs only when the committed `podtemplatespec.json` is regenerated (`python -m
policies.schemas.derive`) and in the staleness test; admission reads the committed file.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "KNOWN_DEFAULTS",
    "KUBERNETES_VERSION",
    "TEMPLATE_METADATA_FIELDS",
    "DerivationError",
    "derive_pod_template_spec",
    "load_definitions",
    "render",
]

KUBERNETES_VERSION = "v1.32.0"
"""The Kubernetes release whose pod schema the CRDs embed (matches the kubectl we test with)."""

ROOT = "io.k8s.api.core.v1.PodTemplateSpec"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
INT_OR_STRING = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
}

TEMPLATE_METADATA_FIELDS = (
    "annotations",
    "creationTimestamp",
    "finalizers",
    "generateName",
    "labels",
    "name",
    "namespace",
)

KNOWN_DEFAULTS: dict[tuple[str, str], Any] = {
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
    ("io.k8s.api.core.v1.LocalObjectReference", "name"): "",
}
"""`+default` markers of k8s.io/api that the exported JSON Schema lost (definition, field)."""

_KEEP = (
    "description",
    "type",
    "format",
    "required",
    "enum",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)
_FORMATS = {"int32", "int64", "float", "double", "byte", "date", "date-time", "uuid"}


class DerivationError(ValueError):
    """The published definitions do not convert into a structural schema."""


def definitions_path(version: str = KUBERNETES_VERSION) -> Path:
    import kubernetes_validate  # a build-time input only; admission never imports it

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    return base / f"{version}-local" / "_definitions.json"


@cache
def load_definitions(version: str = KUBERNETES_VERSION) -> dict[str, Any]:
    with definitions_path(version).open(encoding="utf-8") as f:
        defs: dict[str, Any] = json.load(f)["$defs"]
    return defs


def derive_pod_template_spec(
    definitions: dict[str, Any] | None = None, *, descriptions: bool = True
) -> dict[str, Any]:
    """The structural schema of a PodTemplateSpec, ready to embed in a CRD."""
    defs = load_definitions() if definitions is None else definitions
    converter = _Converter(defs, descriptions=descriptions)
    return converter.definition(ROOT, ())


class _Converter:
    def __init__(self, defs: dict[str, Any], *, descriptions: bool) -> None:
        self.defs = defs
        self.descriptions = descriptions

    def definition(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if name in stack:
            raise DerivationError(f"recursive definition {name} cannot be inlined")
        if name not in self.defs:
            raise DerivationError(f"unknown definition {name}")
        if name in INT_OR_STRING:
            return {"x-kubernetes-int-or-string": True}
        node = self.defs[name]
        if name == OBJECT_META:
            fields = TEMPLATE_METADATA_FIELDS
            node = {**node, "properties": {k: node["properties"][k] for k in fields}}
        return self.node(node, (*stack, name))

    def node(self, node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        if "$ref" in node:
            resolved = self.definition(node["$ref"].rsplit("/", 1)[-1], stack)
            if self.descriptions and "description" in node:
                resolved = {**resolved, "description": node["description"]}
            return resolved
        out: dict[str, Any] = {}
        for key in _KEEP:
            if key not in node:
                continue
            value = node[key]
            if key == "description" and not self.descriptions:
                continue
            if key == "type":
                value = _single_type(value, stack)
            if key == "format" and value not in _FORMATS:
                continue
            out[key] = value
        if "oneOf" in node or "anyOf" in node or "allOf" in node:
            raise DerivationError(f"combinator outside IntOrString/Quantity in {stack[-1]}")
        if "properties" in node:
            out["properties"] = {k: self.node(v, stack) for k, v in node["properties"].items()}
            self._default_map_keys(out, stack)
        elif isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = self.node(node["additionalProperties"], stack)
        if "items" in node:
            out["items"] = self.node(node["items"], stack)
            self._check_map_keys(out, stack)
        if "type" not in out and not out.get("x-kubernetes-int-or-string"):
            raise DerivationError(f"untyped node in {stack[-1]}")
        if (
            out.get("type") == "object"
            and "properties" not in out
            and "additionalProperties" not in out
        ):
            raise DerivationError(f"free-form object in {stack[-1]} would be pruned")
        return out

    def _default_map_keys(self, out: dict[str, Any], stack: tuple[str, ...]) -> None:
        for (definition, field), default in KNOWN_DEFAULTS.items():
            if stack[-1] == definition and field in out["properties"]:
                out["properties"][field]["default"] = default

    def _check_map_keys(self, out: dict[str, Any], stack: tuple[str, ...]) -> None:
        if out.get("x-kubernetes-list-type") != "map":
            return
        items = out["items"]
        for key in out.get("x-kubernetes-list-map-keys", []):
            prop = items.get("properties", {}).get(key)
            if prop is None:
                raise DerivationError(f"list-map key {key} is not a property ({stack[-1]})")
            if key not in items.get("required", []) and "default" not in prop:
                raise DerivationError(
                    f"list-map key {key} of {stack[-1]} is neither required nor defaulted; "
                    "add its Kubernetes default to KNOWN_DEFAULTS"
                )


def _single_type(value: Any, stack: tuple[str, ...]) -> str:
    types = [value] if isinstance(value, str) else [t for t in value if t != "null"]
    if len(types) != 1:
        raise DerivationError(f"ambiguous type {value!r} in {stack[-1]}")
    return str(types[0])


def render(schema: dict[str, Any]) -> str:
    """The committed file's exact text."""
    return json.dumps(schema, indent=1) + "\n"


def main() -> None:
    """Rewrite the committed `podtemplatespec.json` from the installed definitions."""
    target = Path(__file__).with_name("podtemplatespec.json")
    target.write_text(render(derive_pod_template_spec()), encoding="utf-8")
    print(target)


if __name__ == "__main__":
    main()
