"""The git cache on disk, for `gitops.source.git` (blocking: called in a thread): the size of each
cached clone, and the removal of stale lock files. The decisions are `gitops.source.tree`'s."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gitops.source import tree as gittree

__all__ = ["clone_sizes", "remove_stale_locks"]


def clone_sizes(cache_dir: Path) -> list[tuple[str, int, float]]:
    """(name, bytes, last used) of every cached clone."""
    out = []
    for clone in cache_dir.glob("*.git"):
        size = 0
        for current, _, files in os.walk(clone):
            for name in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(current, name)).st_size
        with contextlib.suppress(OSError):
            out.append((clone.name, size, clone.stat().st_mtime))
    return out


def remove_stale_locks(repo: Path, now: float, max_age: float, killed: bool) -> list[str]:
    """Remove the stale `*.lock` files of the clone `repo` (`gittree.stale_locks`); the
    removed ones, relative to `repo`. Pack directories are not searched (git locks no file
    there by name)."""
    found = []
    for current, dirs, files in os.walk(repo):
        if Path(current) == repo / "objects":
            dirs[:] = [d for d in dirs if d == "info"]
        for name in files:
            if name.endswith(".lock"):
                path = os.path.join(current, name)
                with contextlib.suppress(OSError):
                    found.append((path, os.lstat(path).st_mtime))
    removed = []
    for path in gittree.stale_locks(found, now=now, max_age=max_age, killed=killed):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(os.path.relpath(path, repo))
    return removed
