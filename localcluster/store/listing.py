"""LIST semantics: selectors, resourceVersion/resourceVersionMatch, limit/continue paging.

The continue token carries the list's resourceVersion and the last key returned. Pages after
the first are read from a snapshot at the token's version, rebuilt by undoing the newer events
from the storage log (`records_at`), so a paginated list is consistent as with etcd; the same
snapshot serves `resourceVersionMatch=Exact` for past versions. A version older than the
retained event history is refused with 410 Expired, as a compacted etcd revision would be.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localcluster.api import apierrors
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.store.records import Record, dumps
from localcluster.store.selectors import (
    Selector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from localcluster.store.storage import Storage, TooOld

__all__ = [
    "ListResult",
    "list_records",
    "parse_resource_version",
    "parse_selector",
    "records_at",
    "selectable_fields",
]

_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


@dataclass(frozen=True)
class ListResult:
    records: list[Record]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None

    def list_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if self.continue_token:
            meta["continue"] = self.continue_token
        if self.remaining is not None:
            meta["remainingItemCount"] = self.remaining
        return meta


def parse_selector(
    query: Mapping[str, str], info: ResourceInfo, name: str | None = None
) -> Selector:
    """The label and field selectors of a request (plus `metadata.name` for object paths)."""
    resource = f"{info.group}/{info.plural}"
    extra = selectable_fields(info)
    try:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(
            query.get("fieldSelector"), resource, extra, custom=info.is_custom
        )
    except SelectorError as e:
        raise apierrors.bad_request(str(e)) from None
    if name is not None:
        fields = (*fields, *parse_field_selector(f"metadata.name={name}", resource))
    return Selector(labels, fields)


def selectable_fields(info: ResourceInfo) -> tuple[str, ...]:
    """A CRD version's `selectableFields` (`.spec.color` → `spec.color`)."""
    version = info.crd_version or {}
    fields = version.get("selectableFields") or ()
    return tuple(
        str(f.get("jsonPath", "")).lstrip(".")
        for f in fields
        if isinstance(f, dict) and f.get("jsonPath")
    )


def parse_resource_version(value: str) -> int:
    try:
        rv = int(value)
        if rv < 0:
            raise ValueError
    except ValueError:
        raise apierrors.bad_request(
            f'resourceVersion: Invalid value: "{value}": must be a non-negative integer'
        ) from None
    return rv


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded))
        ns, _, name = str(data["start"]).rstrip("\x00").partition("/")
        return int(data["rv"]), (ns, name)
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise apierrors.bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from None


def _check_version(store: Storage, query: Mapping[str, str]) -> tuple[int, bool]:
    """The list's resourceVersion, and whether it is a snapshot in the past (Exact)."""
    current = store.resource_version
    value = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    if match and match not in ("Exact", "NotOlderThan"):
        raise apierrors.bad_request(
            f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"'
        )
    if match and not value:
        raise apierrors.bad_request(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        )
    if not value or value == "0":
        return current, False
    rv = parse_resource_version(value)
    if rv > current:
        raise apierrors.too_large_resource_version(rv, current)
    if match == "Exact" and rv != current:
        return rv, True
    return current, False


def records_at(store: Storage, resource: str, namespace: str | None, rv: int) -> list[Record]:
    """The records as they were at resourceVersion `rv`, rebuilt from the event log.

    Every event after `rv` is undone, newest first: an ADDED object is removed, a MODIFIED or
    DELETED one gets its previous state back. Raises TooOld when the log no longer reaches
    back to `rv` (like a compacted etcd revision).
    """
    state = {_key(r): r for r in store.records(resource, namespace)}
    for event in reversed(store.events_after(rv)):
        if event.resource != resource or (namespace and event.namespace != namespace):
            continue
        key = (event.namespace, event.name)
        if event.type == "ADDED" or event.old is None:
            state.pop(key, None)
        else:
            state[key] = Record(event.old, dumps(event.old))
    return [state[k] for k in sorted(state)]


def list_records(
    store: Storage,
    resource: str,
    namespace: str | None,
    selector: Selector,
    query: Mapping[str, str],
) -> ListResult:
    """LIST at the current version, at an Exact past one, or continuing a paginated list.

    Continued pages are served from the snapshot at the token's resourceVersion, so a
    paginated list is consistent, as with etcd, for as long as the event history reaches.
    """
    token = query.get("continue", "")
    if token and query.get("resourceVersion"):
        raise apierrors.bad_request(
            "specifying resource version is not allowed when using continue"
        )
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise apierrors.bad_request(f"limit: Invalid value: {query.get('limit')!r}") from None
    if token:
        rv, start = _decode_continue(token)
        try:
            records = _at(store, resource, namespace, rv)
        except TooOld:
            raise ApiError(410, "Expired", _CONTINUE_EXPIRED) from None
        records = [r for r in records if _key(r) > start]
    else:
        rv, past = _check_version(store, query)
        if past:
            try:
                records = records_at(store, resource, namespace, rv)
            except TooOld as e:
                raise apierrors.expired(f"too old resource version: {rv} ({e.oldest})") from None
        else:
            records = store.records(resource, namespace)
    if not selector.empty:
        records = [r for r in records if selector.matches(r.obj)]
    if limit > 0 and len(records) > limit:
        page = records[:limit]
        remaining = len(records) - limit
        return ListResult(page, rv, _encode_continue(rv, _key(page[-1])), remaining)
    return ListResult(records, rv)


def _at(store: Storage, resource: str, namespace: str | None, rv: int) -> list[Record]:
    if rv >= store.resource_version:
        return store.records(resource, namespace)
    return records_at(store, resource, namespace, rv)


def _key(record: Record) -> tuple[str, str]:
    meta = record.obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])
