"""The data directory of `trainops up` / `trainops apiserver` is its owner's alone.

It holds every Secret in clear (the SQLite store `state.db` and its `-wal`/`-shm`), the admin
token, the kubeconfig, the CA and serving keys, the pods' environments (Secret values included),
their logs and their mounted Secrets and service-account tokens. Another local user who can read
any of it owns the cluster, so the directory is 0700 and what is written in it is 0600 (0700
for directories and executables): each writer creates its files that way, and `secure` tightens a
directory left by an older version (0755 and 0644 were the umask's defaults) at every start,
returning what it changed so the caller logs it.

What `secure` walks: the whole directory, never following a symlink (a pod's root holds links
to host paths), but not into what the pods' processes write — the persistent-volume claims'
data under `volumes/` (user data, possibly large), each pod's `root/` (links to host paths) and
`volumes/` (emptyDirs; the kubelet writes Secret and token files there without other users'
bits): those directories themselves are tightened, and being 0700 is what protects their
contents. Only group and other permission bits are removed; the owner's are kept.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "Tightened",
    "describe",
    "make_private_dir",
    "make_private_file",
    "secure",
]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_GROUP_OTHER = 0o077
_SKIPPED_TOP = frozenset({"volumes"})
"""Top-level directories whose contents `secure` leaves alone (itself is tightened)."""
_SKIPPED_IN_POD = frozenset({"root", "volumes"})
"""The same in each `pods/<uid>/`: what the pod's processes write (with their umask, 0022)."""


@dataclass(frozen=True)
class Tightened:
    path: str
    """Relative to the data directory (`.` for itself)."""
    old: int
    new: int


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) if needed; `path` itself ends up 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    if stat.S_IMODE(path.stat().st_mode) & _GROUP_OTHER:
        os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~_GROUP_OTHER)


def make_private_file(path: Path, *, also: tuple[str, ...] = ()) -> None:
    """Create `path` empty and 0600 if missing, else remove its group and other bits; the same
    for the siblings named `path` + each suffix in `also` that exist (SQLite's `-wal` and
    `-shm`, which SQLite creates with the database file's mode)."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, PRIVATE_FILE))
    for p in (path, *(path.with_name(path.name + s) for s in also)):
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode & _GROUP_OTHER:
                os.chmod(p, mode & ~_GROUP_OTHER)


def secure(data_dir: Path) -> list[Tightened]:
    """Remove group and other permissions from `data_dir` and what it holds (see the module
    docstring for what is walked); what was changed, in walk order. Entries owned by someone
    else or gone meanwhile are left as they are."""
    changed: list[Tightened] = []
    top = Path(data_dir)
    _tighten(top, top, changed)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(dirpath)
        rel = here.relative_to(top).parts
        if not rel:
            keep = [d for d in dirnames if d not in _SKIPPED_TOP]
            for d in set(dirnames) - set(keep):
                _tighten(top, here / d, changed)
            dirnames[:] = keep
        elif len(rel) == 2 and rel[0] == "pods":
            for d in _SKIPPED_IN_POD.intersection(dirnames):
                _tighten(top, here / d, changed)
                dirnames.remove(d)
        for name in (*dirnames, *filenames):
            _tighten(top, here / name, changed)
    return changed


_SECRETS_FIRST = ("state.db", "state.db-wal", "state.db-shm", "token", "kubeconfig", "api-token")


def describe(changes: list[Tightened], limit: int = 8) -> str:
    """`. 0755→0700, state.db 0644→0600, token 0644→0600, … (and 3 more)`: one line for a log,
    the directory itself and what holds secrets (the store, tokens, keys) named first."""

    def rank(c: Tightened) -> int:
        name = c.path.rsplit("/", 1)[-1]
        if c.path == ".":
            return 0
        return 1 if name in _SECRETS_FIRST or name.endswith(".key") else 2

    ordered = sorted(changes, key=rank)  # stable: the walk's order within a rank
    shown = [f"{c.path} {c.old:04o}→{c.new:04o}" for c in ordered[:limit]]
    more = len(changes) - limit
    return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _tighten(top: Path, path: Path, changed: list[Tightened]) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        return
    old = stat.S_IMODE(st.st_mode)
    if not old & _GROUP_OTHER:
        return
    new = old & ~_GROUP_OTHER
    try:
        os.chmod(path, new)  # not a symlink (checked above); the owner alone writes here
    except (FileNotFoundError, PermissionError):
        return
    rel = path.relative_to(top).as_posix() if path != top else "."
    changed.append(Tightened(rel, old, new))
