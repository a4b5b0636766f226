"""A JobRepository's spec read into one typed value, with the defaults the reconciler owns (pure).

The API server defaults what the CRD schema can (`path`, `recurse`, `interval`, the retry
back-off); this module applies the rest — `targetRevision` unset is the remote HEAD,
`destination.namespace` unset is the JobRepository's own namespace — and the same schema
defaults again, so an object stored before a default existed (or written to a server that does
not default) reads the same.

Durations are Go-style (`30s`, `3m`, `1h30m`, `500ms`), as the CRD's pattern allows.
The retry back-off is Argo CD's: `duration × factor^n`, capped at `maxDuration`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["RepoSpec", "Retry", "backoff_seconds", "parse_duration", "read_spec", "repo_id"]

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DEFAULT_INTERVAL = 180.0
MIN_INTERVAL = 1.0
"""A floor, so `interval: 1ms` cannot turn the reconciler into a busy loop against the remote."""


@dataclass(frozen=True)
class Retry:
    limit: int = 0
    """Retries of a failed sync before giving up; 0: none (no `syncPolicy.retry`)."""
    duration: float = 5.0
    factor: int = 2
    max_duration: float = 180.0


@dataclass(frozen=True)
class RepoSpec:
    repo_url: str
    target_revision: str | None
    path: str
    recurse: bool
    destination: str
    automated: bool
    prune: bool
    self_heal: bool
    retry: Retry
    interval: float
    ignore_differences: tuple[dict[str, Any], ...]
    sync_options: tuple[str, ...]
    secret_name: str | None
    allow_any_revision: bool = False
    """`spec.syncPolicy.allowAnyRevision`: a requested sync (`sync-revision`) may name a
    revision that targetRevision's history does not hold (`gitops.runtime.fetching`)."""
    push_secret_name: str | None = None
    """`spec.push.secretRef.name`: the Secret (key `token`) whose value push webhooks for this
    repository must prove (`gitops.source.pushhooks.PushCheck`); "" when `secretRef` is there
    without a usable name (no push proves it)."""


def repo_id(obj: dict[str, Any]) -> str:
    """`namespace/name` of a JobRepository: the value of the tracking annotation."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def parse_duration(text: str | None, default: float = DEFAULT_INTERVAL) -> float:
    """Seconds of a Go-style duration; `default` when unset or unreadable."""
    if not text or not isinstance(text, str):
        return default
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            return default
        total += float(match[1]) * _UNIT[match[2]]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else default


def backoff_seconds(retry: Retry, attempt: int) -> float:
    """The wait before retry number `attempt` (0-based)."""
    return float(min(retry.duration * retry.factor**attempt, retry.max_duration))


def read_spec(obj: dict[str, Any]) -> RepoSpec:
    meta = obj.get("metadata") or {}
    spec = _dict(obj.get("spec"))
    policy = _dict(spec.get("syncPolicy"))
    automated = policy.get("automated")
    auto = _dict(automated)
    retry_obj = policy.get("retry")
    retry = Retry()
    if isinstance(retry_obj, dict):
        backoff = _dict(retry_obj.get("backoff"))
        retry = Retry(
            limit=int(retry_obj.get("limit", 5) or 0),
            duration=parse_duration(backoff.get("duration"), 5.0),
            factor=max(1, int(backoff.get("factor", 2) or 1)),
            max_duration=parse_duration(backoff.get("maxDuration"), 180.0),
        )
    revision = spec.get("targetRevision")
    return RepoSpec(
        repo_url=str(spec.get("repoURL") or ""),
        target_revision=str(revision) if revision not in (None, "") else None,
        path=str(spec.get("path") or "."),
        recurse=bool(spec.get("recurse", True)),
        destination=str(_dict(spec.get("destination")).get("namespace") or meta.get("namespace")),
        automated=isinstance(automated, dict),
        prune=bool(auto.get("prune", False)),
        self_heal=bool(auto.get("selfHeal", False)),
        retry=retry,
        interval=max(MIN_INTERVAL, parse_duration(spec.get("interval"))),
        ignore_differences=tuple(r for r in spec.get("ignoreDifferences") or () if _is_dict(r)),
        sync_options=tuple(str(o) for o in policy.get("syncOptions") or ()),
        secret_name=_dict(spec.get("secretRef")).get("name") or None,
        allow_any_revision=policy.get("allowAnyRevision") is True,
        push_secret_name=_push_secret(spec),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _push_secret(spec: dict[str, Any]) -> str | None:
    """None when `spec.push.secretRef` is absent; "" when it is there but names nothing usable
    (the repository then takes no push at all, rather than falling back to the shared secret)."""
    push = _dict(spec.get("push"))
    if "secretRef" not in push:
        return None
    name = _dict(push.get("secretRef")).get("name")
    return name if isinstance(name, str) else ""


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)
