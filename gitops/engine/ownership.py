"""Which JobRepository tracks a live object, and which objects a repository may take or prune.

A repository's tracking id is its uid (annotation `gitops.trainops.dev/repository-uid`), beside
the readable `<namespace>/<name>` (`gitops.trainops.dev/repository`). Names are not enough: a
repository deleted and created again under the same name, or two repositories that ended up
with one name, must never prune each other's jobs. So:

- **ours**: the object carries our uid; or, applied before uids were recorded, no uid and our
  `namespace/name` (the next sync writes the uid);
- **another repository's**: it carries a tracking id that is not ours *and that repository
  still exists* (same uid). It is never applied to (no server-side apply with force) and never
  pruned; its resource entry says `tracked by <namespace>/<name>`;
- **orphaned** (its repository is gone, or was recreated under the same name with a new uid):
  adopted on sync — GitOps made it — the object is desired as it is in Git, tracking included,
  so it is OutOfSync until applied in place (same uid);
- **untracked** (no tracking id at all: made by `kubectl apply`, a script, another tool):
  never taken over silently (Argo CD's and Flux's ownership checks): an error at the
  manifest's file:line that applies nothing, unless the repository allows adoption
  (`spec.syncPolicy.adoptExisting: true`, `refuse_untracked`).

Pure but for `foreign_claims`, which is given the one lookup it needs (a repository's uid).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gitops.engine import health, names
from gitops.engine.compare import OUT_OF_SYNC, Comparison, ResourceState
from gitops.engine.pairing import ResourceKey

__all__ = [
    "UNKNOWN",
    "Lookup",
    "Tracking",
    "adopt_existing",
    "claimed",
    "foreign_claims",
    "is_ours",
    "mark_foreign",
    "refuse_untracked",
    "tracked_by_message",
    "tracking",
]

Lookup = Callable[[str, str], Awaitable[str | None]]
"""(namespace, name) → the uid of that JobRepository, None when it does not exist, `UNKNOWN`
when the lookup cannot tell (forbidden, unreachable): the object then counts as another
repository's (the safe side)."""
UNKNOWN = "?"


@dataclass(frozen=True)
class Tracking:
    repository: str | None
    """`namespace/name` of the tracking annotation, None without one."""
    uid: str | None
    """The tracking uid, None without one (objects applied before uids were recorded)."""

    @property
    def tracked(self) -> bool:
        return bool(self.repository or self.uid)

    @property
    def shown(self) -> str:
        return self.repository or f"the JobRepository with uid {self.uid}"


def tracking(obj: Mapping[str, Any] | None) -> Tracking:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    repository = annotations.get(names.REPOSITORY_ANNOTATION)
    uid = annotations.get(names.REPOSITORY_UID_ANNOTATION)
    return Tracking(str(repository) if repository else None, str(uid) if uid else None)


def is_ours(obj: Mapping[str, Any] | None, repository: str, uid: str) -> bool:
    """Whether `obj` was applied by the repository `repository` (`ns/name`) of uid `uid`."""
    t = tracking(obj)
    if t.uid is not None:
        return bool(uid) and t.uid == uid
    return t.repository == repository


def adopt_existing(repository: Mapping[str, Any]) -> bool:
    """`spec.syncPolicy.adoptExisting` of a JobRepository (false unless true)."""
    policy = ((repository.get("spec") or {}).get("syncPolicy")) or {}
    return isinstance(policy, dict) and policy.get("adoptExisting") is True


UNTRACKED_MESSAGE = (
    "exists and was not created by a JobRepository: not taken over (set "
    "spec.syncPolicy.adoptExisting: true to adopt it, or delete it to let this repository "
    "create it)"
)


def refuse_untracked(comparison: Comparison, *, allow: bool) -> Comparison:
    """`comparison` with every desired object whose live one carries no tracking id at all
    made an error that applies nothing (OutOfSync, `UNTRACKED_MESSAGE` at its file:line),
    unless `allow`."""
    if allow:
        return comparison
    out = []
    changed = False
    for r in comparison.resources:
        if r.live is None or r.desired is None or r.prune or tracking(r.live).tracked:
            out.append(r)
            continue
        changed = True
        out.append(_left_alone(r, UNTRACKED_MESSAGE))
    return dataclasses.replace(comparison, resources=tuple(out)) if changed else comparison


def _left_alone(r: ResourceState, message: str) -> ResourceState:
    """`r` made an error that applies nothing: OutOfSync, `message` at its file:line."""
    return dataclasses.replace(
        r,
        desired=None,
        status=OUT_OF_SYNC,
        health=health.assess(r.live),
        message=message,
        error=message,
        diff=None,
    )


def tracked_by_message(owner: str) -> str:
    return f"tracked by {owner}: not taken over, never pruned by this repository"


async def foreign_claims(
    live: Mapping[ResourceKey, Mapping[str, Any]],
    desired: Iterable[ResourceKey],
    repository: str,
    uid: str,
    lookup: Lookup,
) -> dict[ResourceKey, str]:
    """The desired keys whose live object another existing repository tracks → its name."""
    out: dict[ResourceKey, str] = {}
    alive: dict[str, str | None] = {}
    for key in desired:
        obj = live.get(key)
        t = tracking(obj)
        if obj is None or not t.tracked or is_ours(obj, repository, uid):
            continue
        if t.repository is None or "/" not in t.repository:
            out[key] = t.shown  # a uid alone cannot be looked up: keep off it
            continue
        if t.repository not in alive:
            namespace, name = t.repository.split("/", 1)
            alive[t.repository] = await lookup(namespace, name)
        current = alive[t.repository]
        if current == UNKNOWN:
            out[key] = t.shown
            continue
        if current is None or (t.uid is not None and current != t.uid):
            continue  # its repository is gone (or a new one took the name): adoptable
        if t.uid is None and t.repository == repository:
            continue  # ours before uids were recorded
        out[key] = t.shown
    return out


def claimed(comparison: Comparison) -> bool:
    """Whether `comparison` kept off another repository's object: compared again every round
    (that repository may be deleted meanwhile, which changes no object this one watches)."""
    return any(
        r.error is not None and r.error.startswith("tracked by ") for r in comparison.resources
    )


def mark_foreign(comparison: Comparison, foreign: Mapping[ResourceKey, str]) -> Comparison:
    """`comparison` with every resource in `foreign` made an error that applies nothing:
    OutOfSync, `tracked by <ns>/<name>` at its file:line."""
    if not foreign:
        return comparison
    out = []
    for r in comparison.resources:
        owner = foreign.get(r.key) if r.key is not None and not r.prune else None
        if owner is None:
            out.append(r)
            continue
        out.append(_left_alone(r, tracked_by_message(owner)))
    return dataclasses.replace(comparison, resources=tuple(out))
