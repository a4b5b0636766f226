"""Resource endpoints: one dispatcher for every `/api/v1/...` and `/apis/<g>/<v>/...` request.

It resolves the path to a `ResourceInfo`, picks the verb from the method and the path shape
(collection, object, subresource, `?watch`), and hands off to the listing, watch, write and
deletion modules. Responses reuse the stored JSON encodings where they can, which is what keeps
a 10k-object LIST fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from aiohttp import web

from localcluster.api import apierrors, reviews
from localcluster.api.registry import resource_id
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.http import discovery, httputil, tables
from localcluster.http import subresources as handlers_subresources
from localcluster.http.httputil import (
    Accept,
    decode_body,
    flag,
    json_response,
    parse_accept,
    raw_response,
)
from localcluster.http.routing import Target, parse_path
from localcluster.http.watches import serve_watch
from localcluster.store import storage
from localcluster.store.listing import list_records, parse_selector
from localcluster.store.records import Record, dumps
from localcluster.write import deletion, writes
from localcluster.write.state import Server

__all__ = ["USERS", "dispatch", "not_found_resource", "table_bytes"]

USERS: web.AppKey[Mapping[str, Mapping[str, Any]]] = web.AppKey("users")
"""The bearer tokens the server accepts and their users (token → user info), for TokenReview."""


def not_found_resource() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def _view(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the requested version shows it (CRD versions differ only in apiVersion)."""
    if obj.get("apiVersion") != info.api_version:
        return {**obj, "apiVersion": info.api_version}
    return obj


def _object_response(
    info: ResourceInfo,
    obj: dict[str, Any],
    accept: Accept,
    query: Any,
    *,
    status: int = 200,
    warnings: list[str] | tuple[str, ...] = (),
) -> web.Response:
    obj = _view(info, obj)
    if accept.as_kind == "Table":
        include = query.get("includeObject", "Metadata")
        return json_response(tables.to_table(info, [obj], include_object=include), status, warnings)
    if accept.as_kind.startswith("PartialObjectMetadata"):
        partial = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {}),
        }
        return json_response(partial, status, warnings)
    return json_response(obj, status, warnings)


def _list_response(info: ResourceInfo, result: Any, accept: Accept, query: Any) -> web.Response:
    records: list[Record] = result.records
    list_meta = result.list_meta()
    if accept.as_kind == "Table":
        return raw_response(
            table_bytes(info, records, query.get("includeObject", "Metadata"), list_meta)
        )
    if accept.as_kind.startswith("PartialObjectMetadata"):
        head = dumps(
            {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
            }
        )
        return raw_response(
            head[:-1] + b',"items":[' + b",".join(r.partial_raw for r in records) + b"]}"
        )
    head = dumps(
        {
            "kind": info.list_kind or f"{info.kind}List",
            "apiVersion": info.api_version,
            "metadata": list_meta,
        }
    )
    api_version = info.api_version
    parts = [head[:-1] + b',"items":[']
    for i, r in enumerate(records):
        if i:
            parts.append(b",")
        parts.append(r.raw if r.obj.get("apiVersion") == api_version else dumps(_view(info, r.obj)))
    parts.append(b"]}")
    return raw_response(b"".join(parts))


def table_bytes(
    info: ResourceInfo,
    records: list[Record],
    include: str,
    list_meta: dict[str, Any],
    now: datetime | None = None,
) -> bytes:
    """`tables.to_table` encoded row by row: each row embeds the record's cached encoding
    (its PartialObjectMetadata, or the object itself), so only the cells are encoded anew."""
    if include not in ("None", "Object"):
        include = "Metadata"
    cells_of = tables.row_renderer(info, now)
    api_version = info.api_version
    parts = [dumps(tables.table_head(info, list_meta))[:-1], b',"rows":[']
    for i, r in enumerate(records):
        row = b'{"cells":' + dumps(cells_of(r.obj))
        if include == "Metadata":
            row += b',"object":' + r.partial_raw
        elif include == "Object":
            same = r.obj.get("apiVersion") == api_version
            row += b',"object":' + (r.raw if same else dumps(_view(info, r.obj)))
        parts.append(row + b"}" if not i else b"," + row + b"}")
    parts.append(b"]}")
    return b"".join(parts)


async def dispatch(request: web.Request, srv: Server) -> web.StreamResponse:
    target = parse_path(request.path)
    if target is None:
        raise not_found_resource()
    if not target.plural:
        if request.method != "GET":
            raise apierrors.method_not_allowed()
        infos = srv.registry.in_group_version(target.group, target.version)
        if not infos:
            raise not_found_resource()
        gv = f"{target.group}/{target.version}" if target.group else target.version
        return json_response(discovery.api_resource_list(gv, infos))
    info = srv.registry.lookup(target.group, target.version, target.plural)
    if info is None:
        raise not_found_resource()
    if not info.namespaced and target.namespace is not None:
        raise not_found_resource()
    if target.subresource and target.subresource not in info.subresources:
        raise not_found_resource()
    accept = parse_accept(request.headers.get("Accept"))
    if target.subresource in handlers_subresources.HANDLED:
        return await handlers_subresources.handle(request, srv, info, target)
    if target.name is None:
        return await _collection(request, srv, info, target, accept)
    return await _object(request, srv, info, target, accept)


def _namespace(info: ResourceInfo, target: Target) -> str:
    return (target.namespace or "") if info.namespaced else ""


async def _collection(
    request: web.Request, srv: Server, info: ResourceInfo, target: Target, accept: Accept
) -> web.StreamResponse:
    method = request.method
    query = request.query
    namespace = target.namespace
    if method == "GET":
        watching = target.legacy_watch or flag(query, "watch")
        if ("watch" if watching else "list") not in info.verbs:
            raise apierrors.method_not_allowed()
        selector = parse_selector(query, info)
        if watching:
            return await serve_watch(request, srv, info, namespace, selector, accept)
        result = list_records(srv.store, resource_id(info), namespace, selector, query)
        return _list_response(info, result, accept, query)
    if method == "POST" and info.verbs == ("create",):
        body = await decode_body(request)
        return json_response(reviews.review(info, body, request.app.get(USERS)), 201)
    if method == "POST":
        if info.namespaced and namespace is None:
            raise apierrors.method_not_allowed()
        if "create" not in info.verbs:
            raise apierrors.method_not_allowed()
        body = await decode_body(request)
        created = await writes.create(
            srv, info, namespace or "", body, httputil.write_options(request)
        )
        return _object_response(
            info, created.obj, Accept(), query, status=201, warnings=created.warnings
        )
    if method == "DELETE":
        if "deletecollection" not in info.verbs:
            raise apierrors.method_not_allowed()
        return await _delete_collection(request, srv, info, namespace)
    raise apierrors.method_not_allowed()


async def _delete_collection(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str | None
) -> web.Response:
    body = await _optional_body(request)
    opts = deletion.parse_delete_options(body, request.query)
    selector = parse_selector(request.query, info)
    records = srv.store.records(resource_id(info), namespace)
    for rec in records:
        if not selector.empty and not selector.matches(rec.obj):
            continue
        meta = rec.obj["metadata"]
        try:
            await deletion.delete(srv, info, meta.get("namespace", ""), meta["name"], opts)
        except ApiError as e:
            if e.code != 404:
                raise
    return json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"kind": info.plural},
        }
    )


async def _optional_body(request: web.Request) -> Any:
    if not request.can_read_body:
        return None
    body = await decode_body(request)
    return body


async def _object(
    request: web.Request, srv: Server, info: ResourceInfo, target: Target, accept: Accept
) -> web.StreamResponse:
    method = request.method
    query = request.query
    namespace = _namespace(info, target)
    name = target.name or ""
    sub = target.subresource
    if info.namespaced and target.namespace is None:
        raise not_found_resource()
    verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    if not sub and verb not in info.verbs:
        raise apierrors.method_not_allowed()
    if method == "GET":
        if target.legacy_watch or (not sub and flag(query, "watch")):
            selector = parse_selector(query, info, name)
            return await serve_watch(request, srv, info, namespace, selector, accept)
        obj = srv.get(info, namespace, name)
        if obj is None:
            raise apierrors.not_found(info, name)
        return _object_response(info, obj, accept, query)
    if method == "PUT":
        body = await decode_body(request)
        opts = httputil.write_options(request)
        if sub == "finalize":
            return await _finalize(srv, info, name, body, opts)
        result = await writes.update(srv, info, namespace, name, body, opts, subresource=sub)
        return _object_response(info, result.obj, Accept(), query, warnings=result.warnings)
    if method == "PATCH":
        body = await request.read()
        opts = httputil.write_options(request)
        result = await writes.patch(
            srv, info, namespace, name, body, request.content_type, opts, subresource=sub
        )
        status = 201 if result.created else 200
        return _object_response(
            info, result.obj, Accept(), query, status=status, warnings=result.warnings
        )
    if method == "DELETE" and not sub:
        body = await _optional_body(request)
        delete_opts = deletion.parse_delete_options(body, query)
        removed = await deletion.delete(srv, info, namespace, name, delete_opts)
        return json_response(deletion.delete_response(info, removed))
    raise apierrors.method_not_allowed()


async def _finalize(
    srv: Server, info: ResourceInfo, name: str, body: Any, opts: writes.WriteOptions
) -> web.Response:
    """PUT namespaces/<name>/finalize: only spec.finalizers changes."""
    old = srv.get(info, "", name)
    if old is None:
        raise apierrors.not_found(info, name)
    spec = body.get("spec") if isinstance(body, dict) else None
    finalizers = (spec or {}).get("finalizers") if isinstance(spec or {}, dict) else None
    if (
        not isinstance(body, dict)
        or not isinstance(spec or {}, dict)
        or not (
            finalizers is None
            or (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers))
        )
    ):
        raise apierrors.bad_request("the request body must be a Namespace object")
    new = {
        **old,
        "spec": {
            **(old.get("spec") or {}),
            "finalizers": finalizers or [],
        },
    }
    try:
        result = await writes.write_update(srv, info, old, new, opts, subresource="finalize")
    except storage.Conflict:
        raise apierrors.conflict(info, name, apierrors.MODIFIED) from None
    return json_response(result.obj, warnings=result.warnings)
