"""The records the stages of a round hand each other, as plain values: the commit a round read
(`gitops.source` makes it) and what each apply or prune came to (`gitops.runtime.sync` makes
them). The engine derives status from them, so they live here, below every stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitops.engine.pairing import ResourceKey

__all__ = ["FAILED", "PRUNED", "PRUNE_SKIPPED", "REPLACING", "SYNCED", "Commit", "Outcome"]


@dataclass(frozen=True)
class Commit:
    sha: str
    author_name: str
    author_email: str
    committer_date: str
    """ISO 8601 with offset, as `git log --format=%cI` prints it."""
    subject: str
    message: str


SYNCED, FAILED, PRUNED, PRUNE_SKIPPED = "Synced", "SyncFailed", "Pruned", "PruneSkipped"
REPLACING = "Replacing"
"""A Replace=true object deleted, to be created again by the next round once it is gone."""


@dataclass(frozen=True)
class Outcome:
    """What one apply, replace or prune of one object came to."""

    key: ResourceKey
    status: str
    """Synced, SyncFailed, Pruned, PruneSkipped or Replacing."""
    message: str
    live: dict[str, Any] | None = None
    """The object after the operation (None after a prune or a failure)."""

    @property
    def failed(self) -> bool:
        return self.status == FAILED
