"""A checkout's manifest files on disk, as `ManifestEntry`s (`gitops.engine.entries`): every
`*.yaml`, `*.yml`, `*.json` under `path` (its subdirectories too when `recurse`), in sorted order
(posix path order, so the result is the same on every machine), skipping `.git`. Symlinks are
followed only when they resolve inside the repository root (a link to `/etc/passwd` or
`../../secrets` is ignored, as is a `path` with `..` leaving the root); a directory reached twice
through links is read once; a file over 3 MiB is refused whole without reading it.

With a revision's `gitops.engine.limits.Limits`, `LimitExceeded` when the files are too many or
too big together (from their sizes, before any is read), or, file by file, before a file's
documents are parsed, when they take the revision over its documents; objects and depth are
counted while parsing."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from gitops.engine import limits as repo_limits
from gitops.engine.entries import (
    MAX_FILE_BYTES,
    SUFFIXES,
    ManifestEntry,
    entries_from_bytes,
    too_big_message,
)

__all__ = ["SourcesError", "load_directory"]


class SourcesError(Exception):
    """`path` itself is unusable (missing, not a directory, or leaves the repository)."""


def load_directory(
    root: str | os.PathLike[str],
    path: str = ".",
    *,
    recurse: bool = True,
    limits: repo_limits.Limits | None = None,
) -> list[ManifestEntry]:
    """Every entry of every manifest file under `root/path`, in file order (`limits`: see the
    module docstring)."""
    base = Path(os.path.realpath(root))
    start = _inside(base, path)
    if start is None:
        raise SourcesError(f"path {path!r} leaves the repository")
    if not start.exists():
        raise SourcesError(f"path {path!r} does not exist in the repository")
    if start.is_file():
        files = [start] if start.suffix in SUFFIXES else []
    elif start.is_dir():
        files = _walk(base, start, recurse)
    else:
        raise SourcesError(f"path {path!r} is not a directory")
    ordered = sorted(files, key=lambda f: _relative(base, f))
    if limits is not None:
        exceeded = repo_limits.check_files(
            ((_relative(base, f), _size_to_read(f)) for f in ordered), limits
        )
        if exceeded is not None:
            raise repo_limits.LimitExceeded(exceeded)
    out: list[ManifestEntry] = []
    documents = 0
    for file in ordered:
        rel = _relative(base, file)
        data = _read(file, rel)
        if isinstance(data, ManifestEntry):
            out.append(data)
            documents += 1
        else:
            if limits is not None:
                documents += repo_limits.count_documents(data)
                exceeded = repo_limits.check_documents([(rel, documents)], limits)
                if exceeded is not None:
                    raise repo_limits.LimitExceeded(exceeded)
            out.extend(entries_from_bytes(rel, data, limits=limits, objects_before=len(out)))
        if limits is not None:
            exceeded = repo_limits.check_objects(len(out), rel, limits)
            if exceeded is not None:
                raise repo_limits.LimitExceeded(exceeded)
    return out


def _size_to_read(file: Path) -> int:
    try:
        size = file.stat().st_size
    except OSError:
        return 0
    return 0 if size > MAX_FILE_BYTES else size


def _read(file: Path, rel: str) -> bytes | ManifestEntry:
    """The bytes of `file`, or the entry saying why it is not read."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            return ManifestEntry(rel, 1, None, too_big_message(size))
        return file.read_bytes()
    except OSError as e:
        return ManifestEntry(rel, 1, None, f"cannot read: {e.strerror}")


def _walk(base: Path, start: Path, recurse: bool) -> list[Path]:
    """The manifest files under `start`. The real path of each directory is its parent's
    plus its name unless it is a symlink (only then resolved): `realpath` of every directory
    costs a system call per component, quadratic in the depth of a deep tree."""
    found: list[Path] = []
    seen: set[str] = set()
    root = str(base)
    real_of = {str(start): os.path.realpath(start)}
    for current, dirs, files in os.walk(start, followlinks=True):
        real = real_of.pop(current, None) or os.path.realpath(current)
        if real in seen or not _contains(root, real):
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if d != ".git") if recurse else []
        for d in dirs:
            sub = os.path.join(current, d)
            real_of[sub] = os.path.realpath(sub) if os.path.islink(sub) else f"{real}/{d}"
        for name in files:
            path = Path(current, name)
            if path.suffix not in SUFFIXES:
                continue
            if os.path.islink(path) and not _contains(root, os.path.realpath(path)):
                continue  # a symlink leaving the repository
            if not os.path.isfile(path):
                continue  # dangling, or not a regular file
            found.append(path)
    return found


def _contains(root: str, real: str) -> bool:
    """Whether the resolved path `real` is `root` or under it."""
    return real == root or real.startswith(root.rstrip("/") + "/")


def _inside(base: Path, path: str) -> Path | None:
    """`base/path` resolved, if it stays inside `base`."""
    if os.path.isabs(path):
        return None
    resolved = Path(os.path.realpath(base / path))
    if resolved != base and base not in resolved.parents:
        return None
    return resolved


def _relative(base: Path, file: Path) -> str:
    """The file's path as found (links not resolved), relative to the root, posix."""
    try:
        rel = Path(os.path.abspath(file)).relative_to(base)
    except ValueError:
        rel = Path(os.path.relpath(file, base))
    return str(PurePosixPath(*rel.parts)) if rel.parts else "."
