"""Decisions about the git cache and checkouts (pure: git's output in, a decision out).

`gitops.source.git` runs the git CLI and asks these functions what to do:
- `sparse_selection`: which files of a commit to write for a repository's `path` (only those
  under it), or None for the whole tree — when `path` is the root, or when a symlink is on the
  way to or under `path` (its target may be anywhere in the tree: `gitops.source.checkout` follows links
  that stay inside the repository, so the whole tree must be there);
- `stale_locks`: which `*.lock` files of a cached clone to remove before the next git command
  (a lock is left behind when git is killed, e.g. by our timeout, and blocks every later
  command on that clone forever);
- `refs_to_drop`: which of the cache's `refs/trainops/<sha>` refs (one per fetched commit) to
  delete so that the clone does not keep every commit ever fetched;
- `parse_ls_tree`, `parse_cat_file`: a commit's files (blob sha and size of each) and blob
  contents, for reading a commit without a checkout (`gitops.source.incremental`);
- `clones_to_evict`: which cached clones to delete, least recently used first, when the cache
  is over its size cap (a clone deleted is cloned again at its repository's next fetch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = [
    "GITLINK_MODE",
    "KEEP_COMMITS",
    "SYMLINK_MODE",
    "TreeEntry",
    "clones_to_evict",
    "parse_cat_file",
    "parse_ls_files",
    "parse_ls_tree",
    "path_parts",
    "refs_to_drop",
    "sparse_selection",
    "stale_locks",
]

SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
KEEP_COMMITS = 8
"""Commits kept per cached clone (the newest fetched): the one in use, and a few recent ones a
requested sync may go back to without fetching again."""
_COMMIT_REF = re.compile(r"^refs/trainops/[0-9a-f]{40}$")


@dataclass(frozen=True)
class TreeEntry:
    """One file of a commit, from `git ls-tree -r -l`."""

    mode: str
    sha: str
    """The blob's sha (a commit's for a submodule)."""
    size: int | None
    """Bytes; None for a submodule (`-`)."""
    path: str
    """Relative to the repository root, posix."""


def parse_ls_tree(out: bytes) -> list[TreeEntry]:
    """Every record of `git ls-tree -r -l -z` output (`<mode> <type> <sha> <size>\\t<path>`)."""
    entries = []
    for record in out.split(b"\0"):
        meta, sep, path = record.partition(b"\t")
        if not sep:
            continue
        fields = meta.decode("ascii", "replace").split()
        if len(fields) != 4:
            continue
        mode, _type, sha, size = fields
        entries.append(
            TreeEntry(
                mode, sha, int(size) if size.isdigit() else None, path.decode("utf-8", "replace")
            )
        )
    return entries


def parse_cat_file(out: bytes) -> dict[str, bytes]:
    """The content of every blob in `git cat-file --batch` output (`<sha> <type> <size>\\n
    <content>\\n` each; `<name> missing` for one that is not there: left out)."""
    blobs: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        end = out.index(b"\n", at)
        header = out[at:end].decode("ascii", "replace").split()
        at = end + 1
        if len(header) != 3:  # `<name> missing` (or ambiguous): no content follows
            continue
        sha, _type, size = header
        n = int(size)
        blobs[sha] = out[at : at + n]
        at += n + 1
    return blobs


def parse_ls_files(out: str) -> list[tuple[str, str]]:
    """(mode, path) of every entry of `git ls-files --stage -z` output."""
    entries = []
    for record in out.split("\0"):
        if not record:
            continue
        meta, sep, path = record.partition("\t")
        if not sep:
            continue
        entries.append((meta.split(" ", 1)[0], path))
    return entries


def sparse_selection(entries: Iterable[tuple[str, str]], path: str) -> list[str] | None:
    """The files to check out for `path` (posix, relative to the root), or None for all.

    None when `path` is the root (`.`, ``, `./`), has `..` or is absolute (`gitops.source.checkout`
    judges it on the whole tree), or when a symlink is under `path` or is one of its parent directories.
    Submodules (gitlinks) are never checked out."""
    parts = path_parts(path)
    if parts is None or not parts:
        return None
    prefix = "/".join(parts)
    ancestors = {"/".join(parts[:i]) for i in range(1, len(parts))}
    chosen = []
    for mode, name in entries:
        inside = name == prefix or name.startswith(prefix + "/")
        if mode == SYMLINK_MODE and (inside or name in ancestors):
            return None
        if inside and mode != GITLINK_MODE:
            chosen.append(name)
    return chosen


def stale_locks(
    locks: Iterable[tuple[str, float]], *, now: float, max_age: float, killed: bool
) -> list[str]:
    """The lock files (path, mtime) to remove: all of them when a git of ours working on this
    clone was killed (nothing of ours holds them: calls per clone are serialised), else those
    older than `max_age` seconds (no git of ours runs that long: the timeout kills it)."""
    return sorted(p for p, mtime in locks if killed or now - mtime > max_age)


def refs_to_drop(
    refs: Sequence[tuple[str, int]], keep: Iterable[str], limit: int = KEEP_COMMITS
) -> list[str]:
    """Of the cache's (ref, committer time) pairs, the `refs/trainops/<sha>` refs to delete:
    all but the `limit` newest commits and those whose sha is in `keep`. Other refs
    (`refs/trainops/heads/*` of a full fetch) are left alone."""
    kept = set(keep)
    commits = [(t, r) for r, t in refs if _COMMIT_REF.match(r)]
    commits.sort(reverse=True)
    # Those in `keep` count against the limit first: commits made within one second tie on
    # their time, and the one in use must not push the total over `limit`.
    room = max(0, limit - sum(1 for _, r in commits if r.rsplit("/", 1)[1] in kept))
    out = []
    for _, ref in commits:
        if ref.rsplit("/", 1)[1] in kept:
            continue
        if room > 0:
            room -= 1
        else:
            out.append(ref)
    return sorted(out)


def clones_to_evict(
    clones: Iterable[tuple[str, int, float]], *, cap: int, keep: Iterable[str]
) -> list[str]:
    """Of the cached clones (name, bytes, last used), those to delete so that the total fits
    in `cap` bytes: least recently used first, never one in `keep` (in use now)."""
    listed = list(clones)
    total = sum(size for _, size, _ in listed)
    kept = set(keep)
    out = []
    for name, size, _ in sorted(listed, key=lambda c: (c[2], c[0])):
        if total <= cap:
            break
        if name in kept:
            continue
        out.append(name)
        total -= size
    return out


def path_parts(path: str) -> list[str] | None:
    """The components of a relative posix path; None when it is absolute or has `..`."""
    if path.startswith("/"):
        return None
    out: list[str] = []
    for part in PurePosixPath(path).parts:
        if part in ("", "."):
            continue
        if part == "..":
            return None  # `gitops.source.checkout` resolves it (and refuses it when it leaves)
        out.append(part)
    return out
