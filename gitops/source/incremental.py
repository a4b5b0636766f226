"""Reading a commit's manifests incrementally (pure: git's output in, checked entries out).

A file's parsed and pre-checked entries (`gitops.engine.entries` + `gitops.engine.preflight`) depend only
on its content and the policies, so a repository's memo keeps them by git blob sha: a new
commit that changed k of 10,000 files reads, parses and pre-checks k blobs, and takes the
others from the memo. The memo holds only the current commit's blobs (bounded by the
repository's size). A file moved or renamed with its content unchanged keeps its entries and
their lines, under its new path (`relocated`).

`gitops.source.git` lists the tree (`git ls-tree -r -l -z`: mode, type, blob sha, size, path of
every file in one process) and reads the new blobs (`git cat-file --batch`, one process);
`manifest_files` picks the files `gitops.source.checkout.load_directory` would read from a checkout
— same suffixes, same `path` and `recurse` rules, same (posix path) order — or answers None
when only a checkout can tell: a symlink under `path` or on the way (`sources` follows those
staying inside), a `path` with `..` or absolute (`sources` judges it), a submodule at `path`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from gitops.engine import entries as manifest_entries
from gitops.engine import limits as repo_limits
from gitops.engine.limits import LimitExceeded, Limits
from gitops.engine.preflight import Checked, preflight
from gitops.source import checkout
from gitops.source import tree as gittree
from gitops.source.tree import TreeEntry

__all__ = [
    "Parsed",
    "assemble",
    "check_listing",
    "manifest_files",
    "relocated",
    "unread",
]

SYMLINK_MODE, GITLINK_MODE = gittree.SYMLINK_MODE, gittree.GITLINK_MODE


@dataclass(frozen=True)
class Parsed:
    """One blob's parsed and pre-checked entries (under the path of the file it was last
    read as), and how many YAML documents it holds (`gitops.engine.limits.count_documents`):
    a revision's limits count the blobs taken from the memo too."""

    checked: list[Checked]
    documents: int


def manifest_files(
    entries: Iterable[TreeEntry], path: str, *, recurse: bool
) -> list[TreeEntry] | None:
    """The files `checkout.load_directory(checkout, path, recurse=recurse)` would read, in its
    order; None when only a checkout can tell (see the module docstring). Raises
    `checkout.SourcesError` when `path` is not in the commit."""
    parts = gittree.path_parts(path)
    if parts is None:
        return None
    listed = list(entries)
    prefix = "/".join(parts)
    ancestors = {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for e in listed:
        if e.mode == SYMLINK_MODE and (
            not prefix or e.path in ancestors or e.path.startswith(prefix + "/")
        ):
            return None  # `sources` follows it (when it stays inside): only a checkout tells
    if prefix:
        exact = [e for e in listed if e.path == prefix]
        if exact:
            if exact[0].mode == GITLINK_MODE:
                return None
            return exact if _manifest_name(prefix) else []
    chosen = []
    found = not prefix
    start = prefix + "/" if prefix else ""
    for e in listed:
        if not e.path.startswith(start):
            continue
        found = True
        rest = e.path[len(start) :]
        if e.mode == GITLINK_MODE or not _manifest_name(rest):
            continue
        if not recurse and "/" in rest:
            continue
        chosen.append(e)
    if not found:
        raise checkout.SourcesError(f"path {path!r} does not exist in the repository")
    chosen.sort(key=lambda e: e.path)
    return chosen


def check_listing(files: Sequence[TreeEntry], limits: Limits) -> None:
    """Raise `LimitExceeded` when `files` (`manifest_files`) are too many, or hold too many
    bytes to read, for one revision: from the listing's sizes, before any blob is read."""
    exceeded = repo_limits.check_files(
        ((f.path, 0 if _too_big(f) else f.size or 0) for f in files), limits
    )
    if exceeded is not None:
        raise LimitExceeded(exceeded)


def unread(files: Iterable[TreeEntry], cache: Mapping[str, Parsed]) -> list[str]:
    """The blob shas of `files` to read: not in `cache`, and not over the size limit (refused
    unread, as `sources` refuses such a file without reading it). Each sha once, in order."""
    out: dict[str, None] = {}
    for f in files:
        if f.sha not in cache and not _too_big(f):
            out.setdefault(f.sha)
    return list(out)


def assemble(
    files: Sequence[TreeEntry],
    cache: Mapping[str, Parsed],
    read: Mapping[str, bytes],
    limits: Limits | None = None,
) -> tuple[list[Checked], dict[str, Parsed]]:
    """The checked entries of `files` in order, each file's from `cache` (relocated to its
    path) or parsed and pre-checked from `read`; and the cache of these files' blobs only.

    With a revision's `limits`, `LimitExceeded` when its documents (counted on the bytes,
    before anything is parsed), its objects or a document's depth (as they are parsed:
    `gitops.engine.manifests.load_text`) go over."""
    documents = {sha: _documents(sha, cache, read) for sha in dict.fromkeys(f.sha for f in files)}
    if limits is not None:
        exceeded = repo_limits.check_documents(((f.path, documents[f.sha]) for f in files), limits)
        if exceeded is not None:
            raise LimitExceeded(exceeded)
    out: list[Checked] = []
    kept: dict[str, Parsed] = {}
    for f in files:
        known = kept.get(f.sha) or cache.get(f.sha)
        done = known.checked if known is not None else _parse(f, read, limits, len(out))
        mine = relocated(done, f.path)
        # a moved file is copied once, not at every commit
        kept.setdefault(f.sha, Parsed(mine, documents[f.sha]))
        out.extend(mine)
        if limits is not None:
            exceeded = repo_limits.check_objects(len(out), f.path, limits)
            if exceeded is not None:
                raise LimitExceeded(exceeded)
    return out, kept


def _documents(sha: str, cache: Mapping[str, Parsed], read: Mapping[str, bytes]) -> int:
    known = cache.get(sha)
    if known is not None:
        return known.documents
    data = read.get(sha)
    return 1 if data is None else repo_limits.count_documents(data)  # unread: one error entry


def _parse(
    f: TreeEntry, read: Mapping[str, bytes], limits: Limits | None, before: int
) -> list[Checked]:
    if _too_big(f):
        entries = [
            manifest_entries.ManifestEntry(
                f.path, 1, None, manifest_entries.too_big_message(f.size or 0)
            )
        ]
    elif f.sha in read:
        entries = manifest_entries.entries_from_bytes(
            f.path, read[f.sha], limits=limits, objects_before=before
        )
    else:
        entries = [manifest_entries.ManifestEntry(f.path, 1, None, "cannot read: blob not found")]
    return preflight(entries)


def relocated(checked: list[Checked], file: str) -> list[Checked]:
    """`checked` (the entries of one file) under the path `file`: the same entries and lines
    when it already is there, else copies with the new path."""
    if not checked or checked[0].entry.file == file:
        return checked
    out = []
    for c in checked:
        doc = c.entry.document
        entry = replace(
            c.entry, file=file, document=replace(doc, file=file) if doc is not None else None
        )
        out.append(replace(c, entry=entry))
    return out


def _too_big(f: TreeEntry) -> bool:
    return f.size is not None and f.size > manifest_entries.MAX_FILE_BYTES


def _manifest_name(path: str) -> bool:
    return PurePosixPath(path).suffix in manifest_entries.SUFFIXES
