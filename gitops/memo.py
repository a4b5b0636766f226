"""What the GitOps reconciler remembers of each JobRepository between rounds, in memory only
(`gitops.reconciler` keeps one `Memo` per `namespace/name`; `gitops.manager` reads and flags
it; `gitops.operations` records a sync's retry state in it). A restart starts from empty memos
and the recorded status."""

from __future__ import annotations

from dataclasses import dataclass, field

from gitops import status, triggers
from gitops.compare import Comparison, Reuse
from gitops.git import Commit
from gitops.pairing import ResourceKey
from gitops.preflight import Checked

__all__ = ["Memo"]


@dataclass
class Memo:
    """What the last round of one repository saw and did (in memory only)."""

    revision: str | None = None
    head_ref: str | None = None
    """The branch the remote HEAD pointed at (when targetRevision is unset)."""
    stamp: str | None = None
    """What tells whether the live state changed since (`gitops.livestate.State.stamp`)."""
    watch: tuple[ResourceKey, ...] = ()
    """Desired keys of cached kinds whose object was not this repository's at the last
    comparison (`gitops.livestate.State.watch`)."""
    legacy: frozenset[tuple[str, str]] | None = None
    """Kinds still listed by the managed label (objects applied before the uid label); None
    until the first round after a start, which lists the former default kinds so."""
    generation: int | None = None
    checked_for: tuple[str, str, bool, str] | None = None
    checked: list[Checked] = field(default_factory=list)
    blobs: dict[str, list[Checked]] = field(default_factory=dict)
    """The parsed and pre-checked entries of each blob of the commit last read, by blob sha
    (`gitops.incremental`): a new commit reads only the blobs not in here."""
    desired: list[ResourceKey] = field(default_factory=list)
    """The keys `checked` defines (`keys.desired_keys`), computed once per commit."""
    git_kinds: set[tuple[str, str]] = field(default_factory=set)
    """The kinds `checked` holds (`keys.kinds_of`), computed once per commit."""
    commit: Commit | None = None
    synced_revision: str | None = None
    attempts: int = 0
    retry_at: float | None = None
    kinds: set[tuple[str, str]] = field(default_factory=set)
    comparison: Comparison | None = None
    reuse: Reuse | None = None
    """The last comparison's `Comparison.reuse`: the next compares only what changed."""
    claimed: bool = False
    """Whether `comparison` kept off another repository's object (`ownership.claimed`)."""
    refresh: bool = False
    sync_requested: bool = False
    sync_revision: str | None = None
    handling: triggers.Pending | None = None
    """The `gitops.triggers.Pending` requests the current round carries out (recorded as
    handled by each status write of the round), None outside a round or with none."""
    stage: str = status.COMPARISON_ERROR
    """The condition an unexpected exception of the current round becomes."""
    failure: str | None = None
    """The last unexpected exception's message (logged with its traceback once)."""
