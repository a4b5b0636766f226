"""Sync and refresh requests as annotations on the JobRepository, handled once by the leader (pure).

Why annotations: every replica of `trainops gitops` serves the API and the dashboard, but only
the Lease holder reconciles, and its memory is its own. A request must therefore live in the
cluster, where the leader of now — or of later, after a leader change — finds it. The shape is
Flux's `reconcile.fluxcd.io/requestedAt` (any replica, or kubectl, writes a new token; the
controller records the last token it handled in status) and Argo CD's refresh annotation:

    metadata.annotations:
      gitops.trainops.dev/refresh-requested-at: "2026-11-26T10:20:31.123456Z"
      gitops.trainops.dev/sync-requested-at:    "2026-11-26T10:20:35.000001Z"
      gitops.trainops.dev/sync-revision:        "v1.2"      # only with a sync to a revision
    status.lastHandledRequest:
      refreshRequestedAt: "2026-11-26T10:20:31.123456Z"
      syncRequestedAt:    "2026-11-26T10:20:35.000001Z"

A request is pending while its annotation holds a value other than the one recorded as handled
(equality, not order: a clock that went back still counts as new). The leader records the values
it saw at the start of a round in the same status write that records the round's outcome, so a
request is carried out once; a leader that dies before that write leaves it pending and the next
leader carries it out (server-side apply of the same commit changes nothing twice).

Annotations are metadata: they never bump `metadata.generation`, so they are neither a spec
change nor drift; `changed` says when an update carries a new request, to wake the leader.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "HANDLED",
    "REFRESH_REQUESTED_AT",
    "SYNC_REQUESTED_AT",
    "SYNC_REVISION",
    "Pending",
    "changed",
    "pending",
    "record_handled",
    "request_patch",
    "token",
]

REFRESH_REQUESTED_AT = "gitops.trainops.dev/refresh-requested-at"
SYNC_REQUESTED_AT = "gitops.trainops.dev/sync-requested-at"
SYNC_REVISION = "gitops.trainops.dev/sync-revision"
HANDLED = "lastHandledRequest"
"""The status field recording the request values the leader has handled."""

_REFRESH_FIELD = "refreshRequestedAt"
_SYNC_FIELD = "syncRequestedAt"
_REQUEST_KEYS = (REFRESH_REQUESTED_AT, SYNC_REQUESTED_AT, SYNC_REVISION)
_MAX_TOKEN = 128
"""Longer annotation values are not requests (a value is a timestamp or a short token)."""


@dataclass(frozen=True)
class Pending:
    """The requests of one JobRepository not handled yet, and what to record once handled."""

    refresh: bool = False
    sync: bool = False
    revision: str | None = None
    """The revision of a pending sync (None: its targetRevision)."""
    refresh_token: str | None = None
    sync_token: str | None = None

    @property
    def any(self) -> bool:
        return self.refresh or self.sync


def token(now: datetime) -> str:
    """A request's value: RFC 3339 UTC with microseconds (two requests in the same
    microsecond are one request)."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def request_patch(
    what: Literal["sync", "refresh"], now: datetime, revision: str | None = None
) -> dict[str, Any]:
    """The merge patch that asks for a sync (to `revision`, else the target; a revision of an
    earlier request is removed) or a refresh."""
    if what == "refresh":
        return {"metadata": {"annotations": {REFRESH_REQUESTED_AT: token(now)}}}
    return {"metadata": {"annotations": {SYNC_REQUESTED_AT: token(now), SYNC_REVISION: revision}}}


def pending(obj: dict[str, Any]) -> Pending:
    """The requests on `obj` (a JobRepository) that its status does not record as handled."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    handled = (obj.get("status") or {}).get(HANDLED) or {}
    if not isinstance(annotations, dict) or not isinstance(handled, dict):
        return Pending()
    refresh = _new(annotations.get(REFRESH_REQUESTED_AT), handled.get(_REFRESH_FIELD))
    sync = _new(annotations.get(SYNC_REQUESTED_AT), handled.get(_SYNC_FIELD))
    revision = annotations.get(SYNC_REVISION) if sync else None
    if not isinstance(revision, str) or not revision.strip():
        revision = None
    return Pending(
        refresh=refresh is not None,
        sync=sync is not None,
        revision=revision.strip() if revision else None,
        refresh_token=refresh,
        sync_token=sync,
    )


def record_handled(status: dict[str, Any], handled: Pending | None) -> dict[str, Any]:
    """`status` with `handled`'s requests recorded in `lastHandledRequest` (the others' values
    kept); `status` itself when there is nothing to record."""
    if handled is None or not handled.any:
        return status
    record = dict(status.get(HANDLED) or {})
    if handled.refresh_token is not None:
        record[_REFRESH_FIELD] = handled.refresh_token
    if handled.sync_token is not None:
        record[_SYNC_FIELD] = handled.sync_token
    return {**status, HANDLED: record}


def changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether `new` carries request annotations other than `old`'s (a new request to wake
    the leader for; the status write recording it changes none of them)."""

    def requests(obj: dict[str, Any] | None) -> tuple[Any, ...]:
        annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        if not isinstance(annotations, dict):
            return ()
        return tuple(annotations.get(k) for k in _REQUEST_KEYS)

    return requests(old) != requests(new)


def _new(value: Any, handled: Any) -> str | None:
    """`value` when it is a request not handled yet."""
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TOKEN:
        return None
    return value if value != handled else None
