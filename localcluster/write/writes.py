"""The write pipeline for create, update (PUT), patch and server-side apply.

Order, as in kube-apiserver and docs/LOCALCLUSTER.md: decode (`decoding.py`) → (patch) →
status-subresource rules and server-owned metadata → defaults → mutating admission → status
rules again and schema/semantic validation → metadata.generation → validating admission →
managedFields → no-op check (`unchanged`) → store (unless dry-run) → watchers. Generation and
the no-op check see the object as it will be stored, so defaults a webhook puts back are no
change. Warnings from every step are collected and returned with the result so the handler
can send `Warning` headers.

Updates are compare-and-swap on the resourceVersion the pipeline read; a PATCH retries on a
lost race (the client did not ask for a precondition), a PUT reports 409 Conflict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localcluster.api import apierrors
from localcluster.api.registry import CRD_RESOURCE, crd_status, resource_id
from localcluster.api.types import AdmissionAttributes, ApiError, ResourceInfo
from localcluster.schema import crdschema
from localcluster.store import storage
from localcluster.store.records import clone
from localcluster.write import (
    applycheck,
    decoding,
    defaults,
    objectmeta,
    patching,
    plugins,
    validation,
)
from localcluster.write.state import Server

__all__ = [
    "CRD_CLEANUP_FINALIZER",
    "WriteOptions",
    "WriteResult",
    "create",
    "finalized",
    "patch",
    "unchanged",
    "update",
    "write_update",
]

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_CRD_RID = resource_id(CRD_RESOURCE)
_PATCH_RETRIES = 5


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"  # Strict, Warn, Ignore
    force: bool = False
    internal: bool = False  # writes by the server's own controllers skip admission


@dataclass
class WriteResult:
    obj: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    created: bool = False


def _check_namespace_open(srv: Server, info: ResourceInfo, namespace: str, name: str) -> None:
    """NamespaceLifecycle admission: the namespace exists and is not terminating."""
    if not info.namespaced:
        return
    ns = srv.namespace(namespace)
    if ns is None:
        raise ApiError(
            404,
            "NotFound",
            f'namespaces "{namespace}" not found',
            details={"name": namespace, "kind": "namespaces"},
        )
    if (ns.get("metadata") or {}).get("deletionTimestamp"):
        raise apierrors.forbidden(
            info,
            name,
            f"unable to create new content in namespace {namespace} because it is being terminated",
        )


def finalized(obj: dict[str, Any]) -> bool:
    """Marked for deletion with nothing left to wait for: the object can be removed."""
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    if meta.get("deletionGracePeriodSeconds"):
        return False
    return not (obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"))


def _attributes(
    info: ResourceInfo,
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    opts: WriteOptions,
    subresource: str,
) -> AdmissionAttributes:
    meta = obj.get("metadata") or {}
    return AdmissionAttributes(
        operation=operation,  # type: ignore[arg-type]
        info=info,
        namespace=meta.get("namespace", "") if info.namespaced else "",
        name=meta.get("name", ""),
        obj=obj,
        old_obj=old,
        subresource=subresource,
        dry_run=opts.dry_run,
    )


async def _mutate(
    srv: Server,
    info: ResourceInfo,
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    opts: WriteOptions,
    subresource: str,
    warnings: list[str],
) -> dict[str, Any]:
    """Mutating admission (skipped for the server's own writes)."""
    if opts.internal:
        return obj
    if info.is_custom:
        # Decoding a custom resource applies its schema defaults, so mutating webhooks
        # see a defaulted object; prepare_custom_object defaults again after them.
        obj = crdschema.default_custom_object(info, obj)
    attrs = _attributes(info, operation, obj, old, opts, subresource)
    mutated, more = await srv.admission.mutate(attrs)
    warnings.extend(more)
    return obj if mutated is None else mutated


def _check(
    info: ResourceInfo,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    opts: WriteOptions,
    subresource: str,
    warnings: list[str],
) -> dict[str, Any]:
    """Schema (pruning, defaults, validation) and semantic validation: 422 on failure."""
    if info.is_custom:
        # ObjectMeta's causes are listed first, with the schema's and the rules' (one 422).
        obj, more = crdschema.prepare_custom_object(
            info,
            obj,
            old,
            field_validation=opts.field_validation,
            meta_causes=objectmeta.validate_meta(info, obj),
        )
        warnings.extend(more)
        causes = []
    else:
        if not opts.internal:
            warnings.extend(
                crdschema.validate_builtin(info, obj, field_validation=opts.field_validation)
            )
        causes = objectmeta.validate_meta(info, obj)
        causes += validation.validate_builtin_semantics(info, obj)
        if old is not None and not subresource:
            causes += validation.validate_builtin_update(info, old, obj)
        if resource_id(info) == _CRD_RID:
            crdschema.validate_crd(obj)
    if causes:
        meta = obj.get("metadata") or {}
        raise apierrors.invalid(info.kind, info.group, meta.get("name", ""), causes)
    return obj


async def _validate(
    srv: Server,
    info: ResourceInfo,
    operation: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    opts: WriteOptions,
    subresource: str,
    warnings: list[str],
) -> None:
    """Validating admission (skipped for the server's own writes)."""
    if not opts.internal:
        attrs = _attributes(info, operation, obj, old, opts, subresource)
        warnings.extend(await srv.admission.validate(attrs))


async def create(
    srv: Server,
    info: ResourceInfo,
    namespace: str,
    body: Any,
    opts: WriteOptions,
    *,
    applied: bool = False,
) -> WriteResult:
    """POST: a new object (`applied`: `body` came out of server-side apply already)."""
    obj = decoding.as_object(body if applied else clone(body), info.kind)
    decoding.check_type(info, obj)
    decoding.check_body_namespace(info, obj, namespace)
    objectmeta.prepare_create(
        info, obj, namespace=namespace, now=srv.now(), uid=srv.new_uid(), suffix=srv.name_suffix()
    )
    name = obj["metadata"].get("name", "")
    _check_namespace_open(srv, info, namespace, name)
    defaults.default_object(info, obj, create=True)
    defaults.initial_status(info, obj)
    plugins.check_service_account(srv, info, obj, namespace)
    if resource_id(info) == _CRD_RID:
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)
    warnings: list[str] = []
    obj = await _mutate(srv, info, "CREATE", obj, None, opts, "", warnings)
    obj = _check(info, obj, None, opts, "", warnings)
    await _validate(srv, info, "CREATE", obj, None, opts, "", warnings)
    if not applied:
        obj = patching.track_update(
            info, None, obj, manager=opts.field_manager, operation="Update", now=srv.now()
        )
    rid = resource_id(info)
    if opts.dry_run:
        if srv.get(info, namespace, obj["metadata"]["name"]) is not None:
            raise apierrors.already_exists(info, obj["metadata"]["name"])
        return WriteResult(obj, warnings, created=True)
    try:
        stored = await srv.store.create(rid, obj)
    except storage.Exists:
        raise apierrors.already_exists(info, obj["metadata"]["name"]) from None
    if rid == _CRD_RID:
        stored = await establish_crd(srv, stored)
    return WriteResult(stored, warnings, created=True)


async def update(
    srv: Server,
    info: ResourceInfo,
    namespace: str,
    name: str,
    body: Any,
    opts: WriteOptions,
    *,
    subresource: str = "",
) -> WriteResult:
    """PUT: replace an object; a stale metadata.resourceVersion is a 409 Conflict."""
    obj = decoding.as_object(clone(body), info.kind)
    decoding.check_type(info, obj)
    meta = obj.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != name:
        raise apierrors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    meta["name"] = name
    decoding.check_body_namespace(info, obj, namespace)
    old = srv.get(info, namespace, name)
    if old is None:
        raise apierrors.not_found(info, name)
    want = meta.get("resourceVersion")
    if not want and info.is_custom:
        raise apierrors.invalid(
            info.kind,
            info.group,
            name,
            [
                apierrors.cause(
                    "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update",
                    "metadata.resourceVersion",
                )
            ],
        )
    if want and want != old["metadata"]["resourceVersion"]:
        raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource=subresource)
    try:
        return await write_update(srv, info, old, obj, opts, subresource=subresource)
    except storage.Conflict:
        raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource=subresource) from None
    except storage.Missing:
        raise apierrors.not_found(info, name) from None


async def patch(
    srv: Server,
    info: ResourceInfo,
    namespace: str,
    name: str,
    body: bytes,
    content_type: str,
    opts: WriteOptions,
    *,
    subresource: str = "",
) -> WriteResult:
    """PATCH (json, merge, strategic merge) and server-side apply (apply-patch+yaml)."""
    is_apply = content_type.split(";")[0].strip() == "application/apply-patch+yaml"
    applied: dict[str, Any] | None = None
    if is_apply:
        if not opts.field_manager:
            raise apierrors.bad_request("fieldManager is required for apply requests")
        applied = decoding.decode_apply(body)
        applied_name = (applied.get("metadata") or {}).get("name")
        if applied_name and applied_name != name:
            raise apierrors.bad_request(
                f"the name of the object ({applied_name}) does not match the name on the URL ({name})"
            )
        applycheck.check_applied_fields(info, applied, namespace, name)
    strict_errors = [] if is_apply else patching.json_patch_strict_errors(body, content_type)
    for _ in range(_PATCH_RETRIES):
        old = srv.get(info, namespace, name)
        if old is None:
            if applied is None or subresource:
                raise apierrors.not_found(info, name)
            fresh = clone(applied)
            fresh.setdefault("metadata", {})["name"] = name
            obj = patching.server_side_apply(
                info, None, fresh, manager=opts.field_manager, force=opts.force, now=srv.now()
            )
            return await create(srv, info, namespace, obj, opts, applied=True)
        if applied is not None:
            obj = patching.server_side_apply(
                info,
                clone(old),
                clone(applied),
                manager=opts.field_manager,
                force=opts.force,
                now=srv.now(),
                subresource=subresource,
            )
        else:
            obj = patching.apply_patch(
                info, clone(old), body, content_type, field_validation=opts.field_validation
            )
            if strict_errors and opts.field_validation == "Strict":
                raise patching.strict_patch_error(obj, strict_errors)
        obj = decoding.as_object(obj, info.kind)
        meta = obj.setdefault("metadata", {})
        want = meta.get("resourceVersion")
        if want and want != old["metadata"]["resourceVersion"]:
            raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource=subresource)
        if meta.get("name", name) != name:
            raise apierrors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        try:
            result = await write_update(
                srv, info, old, obj, opts, subresource=subresource, applied=applied is not None
            )
        except storage.Conflict:
            continue
        except storage.Missing:
            raise apierrors.not_found(info, name) from None
        if opts.field_validation == "Warn":
            result.warnings[:0] = strict_errors
        return result
    raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource=subresource)


def _without_times(entries: Any) -> Any:
    if not isinstance(entries, list):
        return entries
    return [
        {k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e for e in entries
    ]


def unchanged(old: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether storing `obj` over `old` changes nothing, so nothing is stored.

    kube-apiserver decides this after admission, on the object it would write: the
    resourceVersion does not count, nor do the `time`s of managedFields entries when the
    entries are otherwise the same one for one (`IgnoreManagedFieldsTimestampsTransformer`
    reverts such timestamp-only changes, and etcd then skips the identical write). A change
    of ownership alone — an entry added, removed or with other fields (kubectl's client-side →
    server-side apply switch) — is a change.
    """
    old_meta, meta = old.get("metadata") or {}, obj.get("metadata") or {}
    old_entries, entries = old_meta.get("managedFields"), meta.get("managedFields")
    if isinstance(old_entries, list) and isinstance(entries, list):
        if len(old_entries) != len(entries):
            return False
        old_entries, entries = _without_times(old_entries), _without_times(entries)
    if old_entries != entries:
        return False
    skip = ("resourceVersion", "managedFields")
    if {k: v for k, v in old_meta.items() if k not in skip} != {
        k: v for k, v in meta.items() if k not in skip
    }:
        return False
    return {k: v for k, v in old.items() if k != "metadata"} == {
        k: v for k, v in obj.items() if k != "metadata"
    }


def _strategy_prepare(
    info: ResourceInfo, old: dict[str, Any], obj: dict[str, Any], subresource: str
) -> dict[str, Any]:
    """The registry strategy's PrepareForUpdate: status rules, server-owned metadata.

    Run before admission (webhooks see the carried-over metadata) and again after mutating
    admission, where kube-apiserver runs it, so that status and metadata.generation are
    decided on the object as it will be stored: a webhook re-adding defaults the request
    left out makes no change and bumps nothing.
    """
    if subresource == "status":
        obj = defaults.status_only(old, obj)
    else:
        defaults.keep_status(info, old, obj)
    objectmeta.carry_over_meta(info, old, obj)
    return obj


async def write_update(
    srv: Server,
    info: ResourceInfo,
    old: dict[str, Any],
    obj: dict[str, Any],
    opts: WriteOptions,
    *,
    subresource: str = "",
    applied: bool = False,
) -> WriteResult:
    """Run the update pipeline from `old` to `obj`; raises storage.Conflict on a lost race."""
    obj = _strategy_prepare(info, old, obj, subresource)
    defaults.carry_over(info, old, obj)
    defaults.default_object(info, obj, create=False)
    warnings: list[str] = []
    obj = await _mutate(srv, info, "UPDATE", obj, old, opts, subresource, warnings)
    obj = _strategy_prepare(info, old, obj, subresource)
    obj = _check(info, obj, old, opts, subresource, warnings)
    objectmeta.update_generation(info, old, obj, subresource=subresource)
    await _validate(srv, info, "UPDATE", obj, old, opts, subresource, warnings)
    if not applied and not opts.internal:
        obj = patching.track_update(
            info,
            old,
            obj,
            manager=opts.field_manager,
            operation="Update",
            now=srv.now(),
            subresource=subresource,
        )
    if unchanged(old, obj):
        return WriteResult(old, warnings)
    rid = resource_id(info)
    expect = old["metadata"]["resourceVersion"]
    if opts.dry_run:
        obj["metadata"]["resourceVersion"] = expect
        return WriteResult(obj, warnings)
    meta = obj["metadata"]
    if finalized(obj):
        await srv.store.delete(rid, meta.get("namespace", ""), meta["name"], expect_rv=expect)
        return WriteResult(obj, warnings)
    stored = await srv.store.update(rid, obj, expect_rv=expect)
    if rid == _CRD_RID and subresource != "status":
        stored = await establish_crd(srv, stored)
    return WriteResult(stored, warnings)


async def establish_crd(srv: Server, crd: dict[str, Any]) -> dict[str, Any]:
    """Accept the CRD's names and mark it Established (the apiextensions controllers' job)."""
    if (crd.get("metadata") or {}).get("deletionTimestamp"):
        return crd
    status = crd_status(crd, srv.now())
    if status == crd.get("status"):
        return crd
    new = {**crd, "status": status}
    try:
        return await srv.store.update(_CRD_RID, new, expect_rv=crd["metadata"]["resourceVersion"])
    except (storage.Conflict, storage.Missing):
        return srv.store.get(_CRD_RID, "", crd["metadata"]["name"]) or crd
