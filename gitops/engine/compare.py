"""One comparison of a repository's checked manifests with the live objects (pure).

What gitops-engine's `pkg/sync/reconcile.go` + `pkg/diff` do for an Argo CD Application: every
entry of the pre-flight becomes a `ResourceState` — its key, where it is defined (file:line),
what to apply, the live object, its sync status, health, and why it is not in sync — and every
live object this repository applied that Git no longer has becomes a prune candidate.

Decisions (docs/GITOPS.md has the why):
- an entry the pre-flight refused (a webhook denial, a typo'd kind, a duplicate key) is
  OutOfSync with its message at its file:line; its key (when it has one) still counts as
  desired, so the live object it names is never pruned because its new version is broken;
- a live object this repository applied that no readable entry names is kept, not pruned,
  while an entry in error could name it (its own key, or the same name under its did-you-mean
  kind) or while the file it came from (`sources`: the last status's `resources[].file`) has
  an entry in error; its message names that entry's file:line and error;
- a document that could not be read at all (YAML error, over 3 MiB, alias bomb) has no key, so
  no one can tell which objects it held: prune is *blocked* for the whole repository until it
  reads again (`Comparison.prune_blocked`), rather than deleting what it might still define;
- two documents defining the same object: the first wins, the others are errors naming it;
- prune candidates do not count towards the repository's health (they are on their way out);
- fields the live object holds by hand (annotation `gitops.trainops.dev/held-fields`,
  gitops/engine/handheld.py) are neither compared nor applied, and its message says so.

Compared once per change: a resource's state depends only on its desired object, its live
object and the repository's settings, so `compare` takes the previous comparison's
`Comparison.reuse` and keeps the state of every resource whose desired object is the same
(`is`, or equal) and whose live object has the same uid and resourceVersion (or is missing
both times) — a commit changing one file of 10,000 diffs one resource, not 10,000.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitops.engine import handheld, health, kinds, names
from gitops.engine.diff import DiffResult, diff, pointers_for
from gitops.engine.kinds import CLUSTER_SCOPED
from gitops.engine.pairing import ResourceKey, key_of
from gitops.engine.preflight import Checked

__all__ = [
    "Comparison",
    "ResourceState",
    "Reuse",
    "apply_body",
    "compare",
    "replace_requested",
    "settled",
]

SYNCED, OUT_OF_SYNC, UNKNOWN = "Synced", "OutOfSync", "Unknown"


@dataclass(frozen=True)
class ResourceState:
    key: ResourceKey | None
    """None for a document that could not be read (no kind or name to speak of)."""
    file: str
    line: int
    desired: dict[str, Any] | None
    """The object to apply (tracking metadata included); None when `error` or a prune
    candidate."""
    live: dict[str, Any] | None
    status: str
    health: health.Health | None
    message: str = ""
    error: str | None = None
    diff: DiffResult | None = None
    """What differs, when desired and live differ (its text is rendered on demand)."""
    prune: bool = False
    """Live, applied by this repository, gone from Git."""

    @property
    def diff_text(self) -> str:
        """The unified diff a diff page shows (live to desired, Secret values masked)."""
        return self.diff.text if self.diff is not None else ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass(frozen=True)
class Reuse:
    """What a comparison's per-resource states were computed from, for the next `compare`."""

    settings: tuple[str, str, str, str]
    """(repository, destination, repository uid, ignoreDifferences): any change, no reuse."""
    states: Mapping[ResourceKey, tuple[dict[str, Any], tuple[str, str] | None, ResourceState]]
    """Per key: the desired object (the pre-flight's), the live (uid, resourceVersion) or None
    when missing, and the state compared from them."""


@dataclass(frozen=True)
class Comparison:
    resources: tuple[ResourceState, ...]
    prune_blocked: str | None
    """Why prune must not run now (a file could not be read), or None."""
    reuse: Reuse | None = field(default=None, compare=False, repr=False)
    """For the next `compare(previous=...)`."""

    @property
    def synced(self) -> bool:
        return all(r.status == SYNCED for r in self.resources)

    @property
    def health(self) -> health.Health:
        return health.worst(r.health for r in self.resources if r.health and not r.prune)

    @property
    def errors(self) -> list[ResourceState]:
        return [r for r in self.resources if r.error is not None]


def compare(
    checked: Iterable[Checked],
    live: Mapping[ResourceKey, dict[str, Any]],
    tracked: Collection[ResourceKey],
    *,
    repository: str,
    destination: str,
    ignore_differences: Iterable[Mapping[str, Any]] = (),
    cluster_scoped: Collection[tuple[str, str]] = CLUSTER_SCOPED,
    sources: Mapping[ResourceKey, str] | None = None,
    repository_uid: str = "",
    previous: Reuse | None = None,
) -> Comparison:
    """Compare `checked` (the pre-flight's output, in file order) with `live` (every live
    object of interest by key); `tracked` are the keys of live objects carrying this
    repository's tracking annotation; `sources` the file each object came from, as the last
    status recorded it (an object of a file in error is kept, not pruned); `repository_uid`
    the tracking id written beside the name (gitops/engine/ownership.py). Fields the live object
    holds by hand (gitops/engine/handheld.py) are neither compared nor applied. `previous`: the
    last comparison's `reuse`, whose states are kept where nothing they depend on changed."""
    rules = list(ignore_differences)
    settings = (repository, destination, repository_uid, _settings_text(rules))
    before = previous.states if previous is not None and previous.settings == settings else {}
    states: dict[ResourceKey, tuple[dict[str, Any], tuple[str, str] | None, ResourceState]] = {}
    out: list[ResourceState] = []
    first: dict[ResourceKey, str] = {}
    unreadable: list[str] = []
    kept: dict[ResourceKey, Checked] = {}
    """Keys an entry in error could name (its did-you-mean kind): never pruned."""
    broken: dict[str, Checked] = {}
    """Files with an entry in error (the first such entry): their objects are never pruned."""
    for c in checked:
        obj = c.desired if c.desired is not None else c.entry.obj
        if c.error is not None:
            broken.setdefault(c.file, c)
            for k in _intended_keys(obj, destination, cluster_scoped):
                kept.setdefault(k, c)
        if obj is None or not _named(obj):
            unreadable.append(c.where)
            out.append(
                ResourceState(
                    None,
                    c.file,
                    c.line,
                    None,
                    None,
                    UNKNOWN,
                    None,
                    c.error or "",
                    c.error or "unreadable",
                )
            )
            continue
        key = key_of(obj, destination, cluster_scoped=cluster_scoped)
        current = live.get(key)
        if key in first:
            error = f"{key} is defined more than once (first at {first[key]})"
            out.append(_failed(c, key, current, error))
            continue
        first[key] = c.where
        if c.error is not None or c.desired is None:
            out.append(_failed(c, key, current, c.error or "not an object"))
            continue
        version = _version(current)
        old = before.get(key)
        if (
            old is not None
            and old[1] == version
            and (version is not None or current is None)
            and (old[0] is c.desired or old[0] == c.desired)
        ):
            state = old[2]
            if (state.file, state.line) != (c.file, c.line):
                state = replace(state, file=c.file, line=c.line)
            states[key] = (c.desired, version, state)
            out.append(state)
            continue
        body = apply_body(c.desired, key, repository, repository_uid)
        state = _compared(key, c.file, c.line, body, current, rules)
        states[key] = (c.desired, version, state)
        out.append(state)
    files = sources or {}
    for key in sorted(set(tracked) - first.keys()):
        current = live.get(key)
        cause = kept.get(key) or broken.get(files.get(key, ""))
        if cause is not None:
            message = f"kept, not pruned: {cause.where}: {cause.error}"
            out.append(
                ResourceState(
                    key, cause.file, cause.line, None, current, OUT_OF_SYNC,
                    health.assess(current), message,
                )
            )  # fmt: skip
            continue
        out.append(
            ResourceState(
                key, "", 0, None, current, OUT_OF_SYNC, health.assess(current),
                "not in Git any more", prune=True,
            )
        )  # fmt: skip
    blocked = None
    if unreadable:
        blocked = "prune skipped: " + ", ".join(unreadable) + " could not be read"
    return Comparison(tuple(out), blocked, Reuse(settings, states))


def settled(
    comparison: Comparison,
    results: Mapping[ResourceKey, dict[str, Any] | None],
    *,
    ignore_differences: Iterable[Mapping[str, Any]] = (),
) -> Comparison:
    """`comparison` once a sync's `results` are in — per key, the object the API server
    answered to its apply, or None once pruned: each applied resource compared with that
    answer (its diff, status and health), each pruned one gone, every other state as it was
    (a failed apply or prune changed nothing). The round derives its status from it, with no
    second read of the cluster; `reuse` records the answers' versions, so the next round,
    whose cache shows them, compares nothing again."""
    rules = list(ignore_differences)
    reuse = comparison.reuse
    states = dict(reuse.states) if reuse is not None else {}
    out: list[ResourceState] = []
    for r in comparison.resources:
        if r.key is None or r.key not in results:
            out.append(r)
            continue
        after = results[r.key]
        if after is None:
            if not r.prune:
                out.append(r)
            continue
        if r.desired is None:
            out.append(r)
            continue
        state = _compared(r.key, r.file, r.line, r.desired, after, rules)
        out.append(state)
        if r.key in states:
            states[r.key] = (states[r.key][0], _version(after), state)
    new_reuse = replace(reuse, states=states) if reuse is not None else None
    return Comparison(tuple(out), comparison.prune_blocked, new_reuse)


def _compared(
    key: ResourceKey,
    file: str,
    line: int,
    body: dict[str, Any],
    current: dict[str, Any] | None,
    rules: list[Mapping[str, Any]],
) -> ResourceState:
    """The state of the apply `body` of `key` against `current` (None: missing): the fields
    held by hand left out of both, `rules` (ignoreDifferences) applied."""
    body = handheld.without_held(body, current)
    held = list(handheld.held_pointers(current))
    result = diff(body, current, pointers_for(key, rules) + held)
    message = "" if current is not None else "missing"
    if held:
        message = handheld.held_message(held)
    return ResourceState(
        key,
        file,
        line,
        body,
        current,
        OUT_OF_SYNC if result.modified else SYNCED,
        health.assess(current),
        message,
        diff=result if result.modified else None,
    )


def apply_body(
    desired: dict[str, Any], key: ResourceKey, repository: str, repository_uid: str = ""
) -> dict[str, Any]:
    """`desired` as it is applied: in its namespace, with the tracking labels (managed and,
    when given, the repository's uid) and annotations (the repository's `namespace/name` and
    its uid)."""
    body = copy.deepcopy(desired)
    meta = body.setdefault("metadata", {})
    if key.namespace:
        meta["namespace"] = key.namespace
    labels = meta.setdefault("labels", {})
    labels[names.MANAGED_LABEL] = "true"
    meta.setdefault("annotations", {})[names.REPOSITORY_ANNOTATION] = repository
    if repository_uid:
        labels[names.REPOSITORY_UID_LABEL] = repository_uid
        meta["annotations"][names.REPOSITORY_UID_ANNOTATION] = repository_uid
    return body


def replace_requested(obj: Mapping[str, Any] | None) -> bool:
    """Whether `obj` carries `gitops.trainops.dev/sync-options: Replace=true`."""
    meta = (obj or {}).get("metadata") or {}
    options = str((meta.get("annotations") or {}).get(names.SYNC_OPTIONS_ANNOTATION, ""))
    return any(o.strip().lower() == "replace=true" for o in options.split(","))


def _version(live: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(uid, resourceVersion) of a live object: what tells that it did not change. None when
    missing — and for an object without a resourceVersion, which is then never reused."""
    meta = (live or {}).get("metadata") or {}
    if not meta.get("resourceVersion"):
        return None
    return str(meta.get("uid") or ""), str(meta["resourceVersion"])


def _settings_text(rules: list[Mapping[str, Any]]) -> str:
    return json.dumps(rules, sort_keys=True, default=str)


def _failed(c: Checked, key: ResourceKey, live: dict[str, Any] | None, error: str) -> ResourceState:
    return ResourceState(
        key, c.file, c.line, None, live, OUT_OF_SYNC, health.assess(live), error, error
    )


def _intended_keys(
    obj: Mapping[str, Any] | None, destination: str, cluster_scoped: Collection[tuple[str, str]]
) -> list[ResourceKey]:
    """The keys an entry in error may name: its own, and its did-you-mean kind's."""
    if obj is None or not _named(obj):
        return []
    key = key_of(dict(obj), destination, cluster_scoped=cluster_scoped)
    out = [key]
    meant = kinds.intended(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if meant is not None:
        group, kind = meant
        ns = "" if meant in cluster_scoped else key.namespace or destination
        out.append(ResourceKey(group, kind, ns, key.name))
    return out


def _named(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return bool(obj.get("kind")) and isinstance(meta, dict) and bool(meta.get("name"))
