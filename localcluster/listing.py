"""LIST semantics: selectors, resourceVersion/resourceVersionMatch, limit/continue paging.

The continue token carries the list's resourceVersion and the last key returned. Pages after
the first are read from the current state (not a snapshot at the token's version) — clients see
every object that existed throughout, and possibly newer changes; a token older than the
retained event history is refused with 410 Expired, as a compacted etcd revision would be.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localcluster import apierrors
from localcluster.selectors import (
    Selector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from localcluster.storage import Record, Storage
from localcluster.types import ApiError

__all__ = ["ListResult", "list_records", "parse_resource_version", "parse_selector"]

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


def parse_selector(query: Mapping[str, str], resource: str, name: str | None = None) -> Selector:
    try:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), resource)
    except SelectorError as e:
        raise apierrors.bad_request(str(e)) from None
    if name is not None:
        fields = (*fields, *parse_field_selector(f"metadata.name={name}", resource))
    return Selector(labels, fields)


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


def _check_version(store: Storage, query: Mapping[str, str]) -> int:
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
        return current
    rv = parse_resource_version(value)
    if rv > current:
        raise apierrors.too_large_resource_version(rv, current)
    if match == "Exact" and rv != current:
        raise apierrors.expired(f"too old resource version: {rv} ({current})")
    return current


def list_records(
    store: Storage,
    resource: str,
    namespace: str | None,
    selector: Selector,
    query: Mapping[str, str],
) -> ListResult:
    token = query.get("continue", "")
    if token and query.get("resourceVersion"):
        raise apierrors.bad_request(
            "specifying resource version is not allowed when using continue"
        )
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise apierrors.bad_request(f"limit: Invalid value: {query.get('limit')!r}") from None
    records = store.records(resource, namespace)
    if token:
        rv, start = _decode_continue(token)
        if rv < store.oldest_resource_version:
            raise ApiError(410, "Expired", _CONTINUE_EXPIRED)
        records = [r for r in records if _key(r) > start]
    else:
        rv = _check_version(store, query)
    if not selector.empty:
        records = [r for r in records if selector.matches(r.obj)]
    if limit > 0 and len(records) > limit:
        page = records[:limit]
        remaining = len(records) - limit
        return ListResult(page, rv, _encode_continue(rv, _key(page[-1])), remaining)
    return ListResult(records, rv)


def _key(record: Record) -> tuple[str, str]:
    meta = record.obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])
