"""OpenAPI documents: what kubectl reads before it writes.

kubectl v1.32 reads `GET /openapi/v3` and the per-group-version document for three things:

* **server-side field validation** — if the document has a `patch` operation for the kind
  (matched by its `x-kubernetes-group-version-kind` extension) that declares the
  `fieldValidation` query parameter, kubectl sends `?fieldValidation=Strict` and leaves the
  unknown-field check to the server; without it kubectl falls back to OpenAPI v2 (protobuf) and
  fails.
* **client-side apply** — the strategic merge patch is computed from the component schema whose
  `x-kubernetes-group-version-kind` matches, following `x-kubernetes-patch-merge-key` /
  `x-kubernetes-patch-strategy` on its fields.
* `kubectl explain` (the descriptions).

Built-in schemas come from the JSON schemas shipped in `kubernetes-validate` (Kubernetes v1.32),
converted to OpenAPI 3.0 form by `builtindefs.py` (`#/components/schemas/...` references,
single `type`s, `int-or-string`); custom resources get their CRD version's `openAPIV3Schema`
plus the standard `apiVersion`/`kind`/`metadata` properties, named the way the real server
names them (`dev.tensorstack.batch.v1beta1.TensorFlowTrainingJob`). Documents are pure functions of the
served resources and are memoised; the `hash` in the index is the SHA-512 of the document, so it
changes exactly when the document does and kubectl's disk cache stays correct.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from localcluster.api.types import ResourceInfo
from localcluster.schema import builtindefs

__all__ = [
    "document_hash",
    "openapi_v2",
    "openapi_v3_document",
    "openapi_v3_index",
]

_V3_PREFIX = "#/components/schemas/"
_V2_PREFIX = "#/definitions/"
_DEFS_PREFIX = "#/$defs/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
_DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"

# Query parameters of write operations, as the real documents declare them.
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_CONTENT_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


# --------------------------------------------------------------------------- schemas


def _gvk_ext(info: ResourceInfo, kind: str) -> list[dict[str, str]]:
    return [{"group": info.group, "kind": kind, "version": info.version}]


def _custom_schema(info: ResourceInfo, prefix: str) -> dict[str, Any]:
    version = info.crd_version or {}
    raw = (version.get("schema") or {}).get("openAPIV3Schema") or {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    schema = copy.deepcopy(raw)
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = {"allOf": [{"$ref": prefix + _OBJECT_META}]}
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = _gvk_ext(info, info.kind)
    return schema


def _list_schema(info: ResourceInfo, prefix: str) -> dict[str, Any]:
    return {
        "description": f"{info.list_kind or info.kind + 'List'} is a list of {info.kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {
                "type": "array",
                "items": {"$ref": prefix + builtindefs.definition_name(info)},
            },
            "metadata": {"allOf": [{"$ref": prefix + _LIST_META}]},
        },
        "x-kubernetes-group-version-kind": _gvk_ext(info, info.list_kind or f"{info.kind}List"),
    }


def _schemas(resources: Sequence[ResourceInfo], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    roots = [_OBJECT_META, _LIST_META, _STATUS, _PATCH, _DELETE_OPTIONS]
    for info in resources:
        name = builtindefs.definition_name(info)
        list_name = builtindefs.definition_name(info, list_kind=True)
        if not info.is_custom and name in builtindefs.builtin_definitions():
            roots.append(name)
            if list_name in builtindefs.builtin_definitions():
                roots.append(list_name)
            else:
                out[list_name] = _list_schema(info, prefix)
        elif info.is_custom:
            out[name] = _custom_schema(info, prefix)
            out[list_name] = _list_schema(info, prefix)
        else:
            # A built-in kind kubernetes-validate does not know: accept anything.
            out[name] = {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-group-version-kind": _gvk_ext(info, info.kind),
            }
            out[list_name] = _list_schema(info, prefix)
    builtindefs.closure(roots, prefix, out)
    for info in resources:
        # Fields of CRD schemas may reference nothing; the built-in closure covers the rest.
        if info.is_custom:
            builtindefs.closure(
                builtindefs.refs(out[builtindefs.definition_name(info)]), prefix, out
            )
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- paths


def _param(name: str, where: str = "query", *, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "schema": {"type": "string", "uniqueItems": True},
    }


def _op(
    info: ResourceInfo,
    action: str,
    verb: str,
    op_id: str,
    schema_ref: str,
    *,
    body: tuple[str, ...] = (),
    params: tuple[str, ...] = (),
    v2: bool,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": op_id,
        "tags": [info.group_version.replace("/", "_").replace(".", "")],
        "parameters": [_param(p) for p in params],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": info.group,
            "kind": info.kind,
            "version": info.version,
        },
    }
    if v2:
        op["responses"] = {"200": {"description": "OK", "schema": {"$ref": schema_ref}}}
        if body:
            op["consumes"] = list(body)
            body_ref = _V2_PREFIX + _PATCH if verb == "patch" else schema_ref
            op["parameters"].append(
                {"name": "body", "in": "body", "required": True, "schema": {"$ref": body_ref}}
            )
        op["produces"] = ["application/json", "application/yaml"]
    else:
        op["responses"] = {
            "200": {
                "description": "OK",
                "content": {
                    "application/json": {"schema": {"$ref": schema_ref}},
                    "application/yaml": {"schema": {"$ref": schema_ref}},
                },
            }
        }
        if body:
            body_ref = _V3_PREFIX + _PATCH if verb == "patch" else schema_ref
            op["requestBody"] = {
                "required": True,
                "content": {ct: {"schema": {"$ref": body_ref}} for ct in body},
            }
    return op


def _camel(info: ResourceInfo) -> str:
    gv = "".join(p.capitalize() for p in info.group.split(".")[:1] if p) if info.group else "Core"
    return gv + info.version.capitalize()


def _paths(resources: Sequence[ResourceInfo], prefix: str, *, v2: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for info in sorted(resources, key=lambda r: r.plural):
        base = f"/api/{info.version}" if not info.group else f"/apis/{info.group_version}"
        coll = (
            f"{base}/namespaces/{{namespace}}/{info.plural}"
            if info.namespaced
            else f"{base}/{info.plural}"
        )
        ref = prefix + builtindefs.definition_name(info)
        list_ref = prefix + builtindefs.definition_name(info, list_kind=True)
        scope = "Namespaced" if info.namespaced else ""
        kind = info.kind
        cam = _camel(info)
        common = [_param("pretty")]
        path_params = [_param("name", "path")]
        if info.namespaced:
            path_params.append(_param("namespace", "path"))
        verbs = set(info.verbs)
        collection: dict[str, Any] = {"parameters": common + path_params[1:]}
        if "list" in verbs:
            collection["get"] = _op(
                info,
                "list",
                "get",
                f"list{cam}{scope}{kind}",
                list_ref,
                params=("labelSelector", "fieldSelector", "limit", "continue", "watch"),
                v2=v2,
            )
        if "create" in verbs:
            collection["post"] = _op(
                info,
                "post",
                "post",
                f"create{cam}{scope}{kind}",
                ref,
                body=("*/*",),
                params=_WRITE_PARAMS,
                v2=v2,
            )
        paths[coll] = collection
        subpaths = [("", "")] + [
            (f"/{s}", s.capitalize()) for s in info.subresources if s in ("status", "scale")
        ]
        for suffix, label in subpaths:
            if label == "Scale":
                continue  # scale has its own kind (autoscaling/v1 Scale); not served here
            item: dict[str, Any] = {"parameters": common + path_params}
            if "get" in verbs:
                item["get"] = _op(info, "get", "get", f"read{cam}{scope}{kind}{label}", ref, v2=v2)
            if "update" in verbs:
                item["put"] = _op(
                    info,
                    "put",
                    "put",
                    f"replace{cam}{scope}{kind}{label}",
                    ref,
                    body=("*/*",),
                    params=_WRITE_PARAMS,
                    v2=v2,
                )
            if "patch" in verbs:
                patch_types: tuple[str, ...] = _PATCH_CONTENT_TYPES
                if info.is_custom:
                    patch_types = tuple(t for t in patch_types if "strategic" not in t)
                item["patch"] = _op(
                    info,
                    "patch",
                    "patch",
                    f"patch{cam}{scope}{kind}{label}",
                    ref,
                    body=patch_types,
                    params=(*_WRITE_PARAMS, "force"),
                    v2=v2,
                )
            if "delete" in verbs and not suffix:
                item["delete"] = _op(
                    info,
                    "delete",
                    "delete",
                    f"delete{cam}{scope}{kind}",
                    prefix + _STATUS,
                    params=("dryRun", "gracePeriodSeconds", "propagationPolicy"),
                    v2=v2,
                )
            paths[f"{coll}/{{name}}{suffix}"] = item
    return paths


# --------------------------------------------------------------------------- documents


def _cache_key(resources: Sequence[ResourceInfo]) -> tuple[Any, ...]:
    parts = []
    for r in resources:
        crd_md = (r.crd or {}).get("metadata", {})
        parts.append(
            (
                r.group,
                r.version,
                r.kind,
                r.plural,
                r.namespaced,
                r.list_kind,
                r.verbs,
                r.subresources,
                crd_md.get("uid", ""),
                crd_md.get("resourceVersion", ""),
            )
        )
    return tuple(sorted(parts))


_V3_CACHE: dict[tuple[Any, ...], tuple[dict[str, Any], str]] = {}
_V2_CACHE: dict[tuple[Any, ...], dict[str, Any]] = {}
_CACHE_LIMIT = 256


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> Any:
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


def document_hash(doc: dict[str, Any]) -> str:
    """The hash kubectl sees in `serverRelativeURL` (upper-case hex SHA-512, as the real one)."""
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(data).hexdigest().upper()


def _v3(group_version: str, members: Sequence[ResourceInfo]) -> tuple[dict[str, Any], str]:
    key = (group_version, *_cache_key(members))
    hit = _V3_CACHE.get(key)
    if hit is not None:
        return hit
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": builtindefs.SCHEMA_VERSION},
        "paths": _paths(members, _V3_PREFIX, v2=False),
        "components": {
            "schemas": _schemas(members, _V3_PREFIX),
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "authorization",
                    "description": "Bearer Token authentication",
                }
            },
        },
    }
    return _remember(_V3_CACHE, key, (doc, document_hash(doc)))


def _by_group_version(resources: Sequence[ResourceInfo]) -> dict[str, list[ResourceInfo]]:
    groups: dict[str, list[ResourceInfo]] = {}
    for r in resources:
        groups.setdefault(r.group_version, []).append(r)
    return groups


def _index_key(group_version: str) -> str:
    return f"apis/{group_version}" if "/" in group_version else f"api/{group_version}"


def openapi_v3_index(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """`GET /openapi/v3`: one entry per served group-version, each URL carrying its hash."""
    paths: dict[str, Any] = {}
    for gv, members in sorted(_by_group_version(resources).items()):
        _, digest = _v3(gv, members)
        key = _index_key(gv)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def openapi_v3_document(
    group_version: str, resources: Sequence[ResourceInfo]
) -> dict[str, Any] | None:
    """`GET /openapi/v3/api/v1` or `/openapi/v3/apis/<g>/<v>`; None when not served (404).

    `group_version` is `v1` or `<group>/<version>` (a leading `api/` or `apis/` is accepted).
    The returned dict is shared with the cache: serialise it, do not mutate it.
    """
    gv = group_version.strip("/")
    if gv.startswith("apis/"):
        gv = gv[len("apis/") :]
    elif gv.startswith("api/"):
        gv = gv[len("api/") :]
    members = [r for r in resources if r.group_version == gv]
    if not members:
        return None
    doc, _ = _v3(gv, members)
    return doc


def openapi_v2(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """`GET /openapi/v2` as JSON (Swagger 2.0). kubectl asks for protobuf, which is not served:
    answer 406 to a protobuf-only Accept so kubectl falls back cleanly; JSON callers (client
    libraries, tools) get this document."""
    key = _cache_key(resources)
    hit = _V2_CACHE.get(key)
    if hit is not None:
        return hit
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": builtindefs.SCHEMA_VERSION},
        "paths": _paths(resources, _V2_PREFIX, v2=True),
        "definitions": _schemas(resources, _V2_PREFIX),
        "securityDefinitions": {
            "BearerToken": {"type": "apiKey", "in": "header", "name": "authorization"}
        },
        "security": [{"BearerToken": []}],
    }
    return _remember(_V2_CACHE, key, doc)
