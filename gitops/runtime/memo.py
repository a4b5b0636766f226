"""What the GitOps reconciler remembers of each JobRepository between rounds, in memory only.

`gitops.runtime.reconciler` keeps one `Memo` per `namespace/name`. It is a handful of records,
each written by one stage of the round and only read by the others:

- `Source` — the fetch and read stage (`reconciler._fetch`): the commit, its checked entries;
- `Live` — the live-state and compare stage (`reconciler._compare_round`): what the live
  objects looked like and what the comparison said;
- `Retry` — the sync operation (`gitops.runtime.operations`): the revision synced, attempts and
  back-off;
- `Requests` — the sync and refresh requests the round carries out (`gitops.engine.triggers`);
- `Failure` — the stage the round is in, for an unexpected exception, and its last message.

A restart starts from empty memos and the recorded status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitops.engine import kinds, status, triggers
from gitops.engine.compare import Comparison, Reuse
from gitops.engine.finished import Finished
from gitops.engine.limits import Exceeded
from gitops.engine.pairing import ResourceKey
from gitops.engine.preflight import Checked
from gitops.engine.records import Commit
from gitops.source.incremental import Parsed

__all__ = ["Failure", "Live", "Memo", "Requests", "Retry", "Source"]


@dataclass
class Source:
    """The fetch and read stage's: which commit, and what its manifests are."""

    head_ref: str | None = None
    """The branch the remote HEAD pointed at (when targetRevision is unset)."""
    checked_for: tuple[str, str, bool, str] | None = None
    """(commit sha, path, recurse, destination) `checked` was read for."""
    commit: Commit | None = None
    bounded: list[Checked] = field(default_factory=list)
    """The entries after pre-flight and the tenancy boundaries, before Pod Security."""
    levels_for: tuple[tuple[str, str, bool, str], tuple[tuple[str, str], ...]] | None = None
    """(checked_for, the namespaces' Pod Security levels) `checked` was decided with."""
    checked: list[Checked] = field(default_factory=list)
    cluster_scoped: frozenset[tuple[str, str]] = kinds.CLUSTER_SCOPED
    """The cluster-scoped kinds of `checked`, as discovery said (`gitops.engine.kinds`)."""
    blobs: dict[str, Parsed] = field(default_factory=dict)
    """The parsed and pre-checked entries of each blob of the commit last read, by blob sha
    (`gitops.source.incremental`): a new commit reads only the blobs not in here."""
    refused: tuple[tuple[str, str, bool, str], Exceeded] | None = None
    """The (commit sha, path, recurse, destination) last refused as over a limit, and why: the
    next rounds answer the same without reading it again."""
    desired: list[ResourceKey] = field(default_factory=list)
    """The keys `checked` defines (`keys.desired_keys`), computed once per commit."""
    git_kinds: set[tuple[str, str]] = field(default_factory=set)
    """The kinds `checked` holds (`keys.kinds_of`), computed once per commit."""


@dataclass
class Live:
    """The live-state and compare stage's: what the cluster looked like, what differed."""

    revision: str | None = None
    """The commit the last comparison was made against."""
    generation: int | None = None
    """The JobRepository's generation at the last comparison."""
    stamp: str | None = None
    """What tells whether the live state changed since (`gitops.runtime.livestate.State.stamp`)."""
    watch: tuple[ResourceKey, ...] = ()
    """Desired keys of cached kinds whose object was not this repository's at the last
    comparison (`gitops.runtime.livestate.State.watch`)."""
    legacy: frozenset[tuple[str, str]] | None = None
    """Kinds still listed by the managed label (objects applied before the uid label); None
    until the first round after a start, which lists the former default kinds so."""
    kinds: set[tuple[str, str]] = field(default_factory=set)
    """The kinds the repository has applied and still has objects of, as its status records
    them (`appliedKinds`): a kind gone from Git is still looked at until its objects are
    pruned."""
    fetched: dict[ResourceKey, dict[str, Any]] = field(default_factory=dict)
    """The whole objects of kinds outside the job caches the last probe read (by key): taken
    again while the metadata cache shows the same resourceVersion (`gitops.runtime.metacache`)."""
    comparison: Comparison | None = None
    reuse: Reuse | None = None
    """The last comparison's `Comparison.reuse`: the next compares only what changed."""
    claimed: bool = False
    """Whether `comparison` kept off another repository's object (`ownership.claimed`)."""
    finished: dict[ResourceKey, Finished] | None = None
    """The training jobs that finished in sync with Git (`gitops.engine.finished`); None until
    the first comparison after a start, which reads them from the status."""


@dataclass
class Retry:
    """The sync operation's: what was synced, and the retry back-off of a failed sync."""

    synced_revision: str | None = None
    attempts: int = 0
    retry_at: float | None = None
    replacing: set[ResourceKey] = field(default_factory=set)
    """Objects a Replace deleted that a later round creates again (`REPLACING`)."""


@dataclass
class Requests:
    """The sync and refresh requests of the JobRepository the round carries out."""

    refresh: bool = False
    sync_requested: bool = False
    sync_revision: str | None = None
    handling: triggers.Pending | None = None
    """The `gitops.engine.triggers.Pending` requests the current round carries out (recorded as
    handled by each status write of the round), None outside a round or with none."""


@dataclass
class Failure:
    """Where the round is, for an unexpected exception, and the last one's message."""

    stage: str = status.COMPARISON_ERROR
    """The condition an unexpected exception of the current round becomes."""
    message: str | None = None
    """The last unexpected exception's message (logged with its traceback once)."""


@dataclass
class Memo:
    """What the last round of one repository saw and did (in memory only), by stage."""

    source: Source = field(default_factory=Source)
    live: Live = field(default_factory=Live)
    retry: Retry = field(default_factory=Retry)
    requests: Requests = field(default_factory=Requests)
    failure: Failure = field(default_factory=Failure)
