"""DELETE: preconditions, propagation policy, finalizers and graceful pod deletion.

An object is removed at once only when nothing has to happen first. Otherwise it gets a
`deletionTimestamp` and stays until its finalizers are gone: `foregroundDeletion` (the garbage
collector removes it once blocking dependents are gone), `orphan` (the collector strips owner
references from dependents), `kubernetes` in a namespace's `spec.finalizers` (the namespace
controller empties it), or a pod's grace period (the kubelet stops its processes and deletes it
again with `gracePeriodSeconds=0`). The garbage collector itself lives in `controllers/garbagecollector.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from localcluster.api import apierrors
from localcluster.api.registry import resource_id
from localcluster.api.types import AdmissionAttributes, ResourceInfo
from localcluster.store import storage
from localcluster.store.records import clone
from localcluster.write import objectmeta
from localcluster.write.state import Server

__all__ = [
    "DeleteOptions",
    "DeleteResult",
    "delete",
    "delete_response",
    "parse_delete_options",
]

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
# Resources whose DELETE answers with the object rather than a Status (as the real server).
_RETURNS_OBJECT = frozenset({"/pods", "/namespaces"})


@dataclass(frozen=True)
class DeleteOptions:
    propagation: str | None = None  # Background, Foreground, Orphan
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


@dataclass
class DeleteResult:
    obj: dict[str, Any]
    removed: bool  # gone from storage now (else: marked for deletion)


def parse_delete_options(body: dict[str, Any] | None, query: Any) -> DeleteOptions:
    """DeleteOptions from the request body and/or query parameters (both are allowed)."""
    body = body or {}
    if not isinstance(body, dict):
        raise apierrors.bad_request("DeleteOptions must be an object")
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise apierrors.bad_request(
            "preconditions: expected an object with uid and/or resourceVersion"
        )
    propagation = body.get("propagationPolicy") or query.get("propagationPolicy")
    orphan = body.get("orphanDependents", query.get("orphanDependents"))
    if propagation is None and orphan is not None:
        propagation = "Orphan" if str(orphan).lower() == "true" else "Background"
    if propagation not in (None, "Background", "Foreground", "Orphan"):
        raise apierrors.invalid(
            "DeleteOptions",
            "",
            "",
            [
                apierrors.cause(
                    "FieldValueNotSupported",
                    f'Unsupported value: "{propagation}": supported values: "Foreground", "Background", "Orphan"',
                    "propagationPolicy",
                )
            ],
        )
    grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
    try:
        grace_value = None if grace is None else int(grace)
    except (TypeError, ValueError):
        raise apierrors.bad_request(f"invalid gracePeriodSeconds: {grace!r}") from None
    dry = list(body.get("dryRun") or [])
    if hasattr(query, "getall"):
        dry += query.getall("dryRun", [])
    return DeleteOptions(
        propagation=propagation,
        grace_period=grace_value,
        uid=pre.get("uid"),
        resource_version=pre.get("resourceVersion"),
        dry_run="All" in dry,
    )


def _check_preconditions(info: ResourceInfo, obj: dict[str, Any], opts: DeleteOptions) -> None:
    meta = obj["metadata"]
    name = meta["name"]
    if opts.uid is not None and opts.uid != meta.get("uid"):
        raise apierrors.conflict(
            info,
            name,
            f"Precondition failed: UID in precondition: {opts.uid}, UID in object meta: {meta.get('uid')}",
        )
    if opts.resource_version is not None and opts.resource_version != meta.get("resourceVersion"):
        raise apierrors.conflict(
            info,
            name,
            "Precondition failed: ResourceVersion in precondition: "
            f"{opts.resource_version}, ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _pod_grace(srv: Server, obj: dict[str, Any], opts: DeleteOptions) -> int:
    """Seconds the kubelet gets to stop the pod; 0 removes it at once.

    A pod bound to a node that does not exist has no kubelet to stop it: it goes at once (the
    real pod garbage collector force-deletes such pods shortly after).
    """
    spec = obj.get("spec") or {}
    if not spec.get("nodeName") or srv.store.get("/nodes", "", spec["nodeName"]) is None:
        return 0
    if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    grace = opts.grace_period
    if grace is None:
        grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
    return max(grace, 0)


async def delete(
    srv: Server,
    info: ResourceInfo,
    namespace: str,
    name: str,
    opts: DeleteOptions,
    *,
    internal: bool = False,
) -> DeleteResult:
    """Delete or mark for deletion; retries on lost compare-and-swap races."""
    if resource_id(info) == "/namespaces" and name in PROTECTED_NAMESPACES and not internal:
        raise apierrors.forbidden(info, name, "this namespace may not be deleted")
    for _ in range(5):
        old = srv.get(info, namespace, name)
        if old is None:
            raise apierrors.not_found(info, name)
        _check_preconditions(info, old, opts)
        if not internal:
            await srv.admission.validate(
                AdmissionAttributes(
                    operation="DELETE",
                    info=info,
                    namespace=namespace if info.namespaced else "",
                    name=name,
                    obj=None,
                    old_obj=old,
                    dry_run=opts.dry_run,
                )
            )
        try:
            return await _delete_once(srv, info, old, opts)
        except storage.Conflict:
            continue
        except storage.Missing:
            raise apierrors.not_found(info, name) from None
    raise apierrors.conflict(info, name, apierrors.MODIFIED)


async def _delete_once(
    srv: Server, info: ResourceInfo, old: dict[str, Any], opts: DeleteOptions
) -> DeleteResult:
    rid = resource_id(info)
    meta = old["metadata"]
    expect = meta["resourceVersion"]
    obj = clone(old)
    new_meta = obj["metadata"]
    finalizers = list(new_meta.get("finalizers") or ())
    if opts.propagation == "Foreground" and FOREGROUND not in finalizers:
        finalizers = [f for f in finalizers if f != ORPHAN] + [FOREGROUND]
    elif opts.propagation == "Orphan" and ORPHAN not in finalizers:
        finalizers = [f for f in finalizers if f != FOREGROUND] + [ORPHAN]
    grace = _pod_grace(srv, old, opts) if rid == "/pods" else 0
    if rid == "/namespaces":
        blocking = bool((old.get("spec") or {}).get("finalizers")) or bool(finalizers)
    else:
        blocking = bool(finalizers) or grace > 0
    if not blocking:
        if opts.dry_run:
            return DeleteResult(old, True)
        gone = await srv.store.delete(
            rid, meta.get("namespace", ""), meta["name"], expect_rv=expect
        )
        return DeleteResult(gone, True)
    now = srv.clock()
    changed = False
    if finalizers != list(meta.get("finalizers") or ()):
        new_meta["finalizers"] = finalizers
        changed = True
    if not meta.get("deletionTimestamp"):
        new_meta["deletionTimestamp"] = objectmeta.now_rfc3339(now + timedelta(seconds=grace))
        new_meta["deletionGracePeriodSeconds"] = grace
        objectmeta.bump_generation(info, obj)
        if rid == "/namespaces":
            obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        changed = True
    elif rid == "/pods" and grace < int(meta.get("deletionGracePeriodSeconds") or 0):
        new_meta["deletionTimestamp"] = objectmeta.now_rfc3339(now + timedelta(seconds=grace))
        new_meta["deletionGracePeriodSeconds"] = grace
        changed = True
    if rid == "/pods" and grace == 0 and not finalizers:
        if opts.dry_run:
            return DeleteResult(old, True)
        gone = await srv.store.delete(
            rid, meta.get("namespace", ""), meta["name"], expect_rv=expect
        )
        return DeleteResult(gone, True)
    if not changed or opts.dry_run:
        return DeleteResult(obj if opts.dry_run else old, False)
    stored = await srv.store.update(rid, obj, expect_rv=expect)
    return DeleteResult(stored, False)


def delete_response(info: ResourceInfo, result: DeleteResult) -> dict[str, Any]:
    """The body of a DELETE answer: the object, or a Success Status once it is gone."""
    if not result.removed or resource_id(info) in _RETURNS_OBJECT:
        return result.obj
    meta = result.obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name", "")}
    if info.group:
        details["group"] = info.group
    details["kind"] = info.plural
    details["uid"] = meta.get("uid", "")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
