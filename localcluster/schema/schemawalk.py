"""A cursor over a kind's schema: the list and map semantics patching and field ownership need.

Strategic merge patch, server-side apply and managedFields all ask the same questions while they
walk an object: "is this list merged by key, and by which keys?", "is this map atomic?", "what
schema do the items have?". Built-in kinds answer from the kubernetes-validate definitions
(`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-patch-strategy`,
`x-kubernetes-patch-merge-key`, `x-kubernetes-map-type`); custom resources answer from the CRD's
structural schema (lists are atomic unless `x-kubernetes-list-type` says otherwise, as on a real
server). A field the schema does not know is "deduced": maps merge, lists are atomic.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from localcluster.api.types import ResourceInfo
from localcluster.schema import builtindefs

__all__ = ["ListSemantics", "SchemaCursor", "cursor_for"]

ListType = Literal["atomic", "map", "set"]

# Defaults of list-map key fields in the built-in kinds' OpenAPI (kubernetes-validate's JSON
# schemas carry no defaults): container and service ports default `protocol` to TCP.
_BUILTIN_KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


@dataclass(frozen=True)
class ListSemantics:
    """How a list merges. `keys` are the map-list keys (SSA identity); `merge_key` is the
    strategic-merge-patch key (the first of them for built-ins); `retain_keys` for
    `patchStrategy: retainKeys` fields."""

    list_type: ListType = "atomic"
    keys: tuple[str, ...] = ()
    patch_merge: bool = False
    merge_key: str = ""
    retain_keys: bool = False
    key_defaults: tuple[tuple[str, Any], ...] = ()

    def identity(self, item: dict[str, Any]) -> dict[str, Any]:
        """An item's key values, absent keys filled from their defaults (as the API server
        keys `ports` by `{"containerPort": 80, "protocol": "TCP"}` when protocol is omitted)."""
        defaults = dict(self.key_defaults)
        return {
            k: item[k] if k in item else defaults[k]
            for k in self.keys
            if k in item or k in defaults
        }


class SchemaCursor:
    """One node of a schema (None: unknown/deduced). Cheap to create; never mutates."""

    __slots__ = ("_defs", "_node")

    def __init__(self, node: dict[str, Any] | None, defs: dict[str, Any] | None) -> None:
        self._defs = defs
        self._node = _resolve(node, defs)

    @property
    def known(self) -> bool:
        return self._node is not None

    @property
    def node(self) -> dict[str, Any] | None:
        return self._node

    def field(self, name: str) -> SchemaCursor:
        """The schema of property `name` (or of the map's values)."""
        node = self._node
        if node is None:
            return SchemaCursor(None, self._defs)
        props = node.get("properties") or {}
        if name in props:
            return SchemaCursor(props[name], self._defs)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return SchemaCursor(extra, self._defs)
        return SchemaCursor(None, self._defs)

    def raw_field(self, name: str) -> dict[str, Any] | None:
        """The unresolved property node (extensions sit next to a `$ref`)."""
        node = self._node
        if node is None:
            return None
        props = node.get("properties") or {}
        if name in props:
            return props[name]
        extra = node.get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def items(self) -> SchemaCursor:
        node = self._node
        items = node.get("items") if node else None
        return SchemaCursor(items if isinstance(items, dict) else None, self._defs)

    def is_map(self) -> bool:
        """A map (string keys chosen by the user) rather than a struct with fixed fields."""
        node = self._node
        return bool(node) and not node.get("properties") and bool(node.get("additionalProperties"))  # type: ignore[union-attr]

    def is_atomic_map(self) -> bool:
        node = self._node
        return bool(node) and node.get("x-kubernetes-map-type") == "atomic"  # type: ignore[union-attr]

    def preserves_unknown(self) -> bool:
        node = self._node
        return node is None or bool(node.get("x-kubernetes-preserve-unknown-fields"))

    def list_semantics(self, name: str) -> ListSemantics:
        """How the list in property `name` merges."""
        raw = self.raw_field(name) or {}
        resolved = self.field(name).node or {}
        ext = {**resolved, **raw}
        declared = ext.get("x-kubernetes-list-type")
        list_type: ListType = declared if declared in ("atomic", "map", "set") else "atomic"
        keys = tuple(ext.get("x-kubernetes-list-map-keys") or ())
        strategy = str(ext.get("x-kubernetes-patch-strategy") or "")
        merge_key = str(ext.get("x-kubernetes-patch-merge-key") or "")
        if declared not in ("atomic", "map", "set"):
            if merge_key:
                list_type, keys = "map", (merge_key,)
            elif "merge" in strategy:
                list_type = "set"
            else:
                list_type = "atomic"
        if list_type == "map" and not keys and merge_key:
            keys = (merge_key,)
        item_props = (self.field(name).items().node or {}).get("properties") or {}
        key_defaults = []
        for key in keys:
            prop = item_props.get(key) or {}
            if "default" in prop:
                key_defaults.append((key, prop["default"]))
            elif self._defs is not None and key in _BUILTIN_KEY_DEFAULTS and key in item_props:
                key_defaults.append((key, _BUILTIN_KEY_DEFAULTS[key]))
        return ListSemantics(
            list_type=list_type,
            keys=keys,
            patch_merge="merge" in strategy.split(","),
            merge_key=merge_key or (keys[0] if keys else ""),
            retain_keys="retainKeys" in strategy.split(","),
            key_defaults=tuple(key_defaults),
        )

    def retains_keys(self, name: str) -> bool:
        raw = self.raw_field(name) or {}
        return "retainKeys" in str(raw.get("x-kubernetes-patch-strategy") or "").split(",")


def _resolve(node: dict[str, Any] | None, defs: dict[str, Any] | None) -> dict[str, Any] | None:
    seen = 0
    while isinstance(node, dict) and seen < 32:
        seen += 1
        ref = node.get("$ref")
        if not ref and isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            ref = node["allOf"][0].get("$ref")
        if not ref or defs is None:
            return node
        target = defs.get(str(ref).rsplit("/", 1)[-1])
        if target is None:
            return None
        node = target
    return node if isinstance(node, dict) else None


@functools.cache
def _builtin_root(group: str, version: str, kind: str) -> str | None:
    info = ResourceInfo(group, version, kind, "", "", True)
    name = builtindefs.definition_name(info)
    return name if name in builtindefs.builtin_definitions() else None


def cursor_for(info: ResourceInfo) -> SchemaCursor:
    """The root cursor of a kind: the built-in definition or the CRD version's schema."""
    if info.is_custom:
        schema = ((info.crd_version or {}).get("schema") or {}).get("openAPIV3Schema")
        return _CustomRoot(schema)
    name = _builtin_root(info.group, info.version, info.kind)
    defs = builtindefs.builtin_definitions()
    return SchemaCursor(defs[name] if name else None, defs)


class _CustomRoot(SchemaCursor):
    """A CRD schema root: `metadata` is ObjectMeta whatever the CRD says."""

    __slots__ = ()

    def __init__(self, schema: dict[str, Any] | None) -> None:
        super().__init__(schema, None)

    def field(self, name: str) -> SchemaCursor:
        if name == "metadata":
            defs = builtindefs.builtin_definitions()
            return SchemaCursor(defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"], defs)
        return super().field(name)
