"""A commit's checked manifests, for `gitops.runtime.reconciler`: by blob where it can
(`gitops.source.incremental`: only blobs not read before are read, parsed and pre-checked), from a
checkout where only a checkout can tell (a symlink under `path` or on the way to it).

Always the fetched sha, never the branch resolved again: a push since the fetch must not
apply another commit than the one status records.

Bounded by the revision's `gitops.engine.limits.Limits` at each step, before the work the
limit bounds: files and bytes from the tree listing before any blob is read, documents on the
bytes before anything is parsed, objects and depth while parsing; over one, the revision is
refused (`LimitExceeded`). Parsing runs in a thread, never on the event loop."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from gitops.engine.limits import DEFAULT, Limits
from gitops.engine.preflight import Checked, preflight
from gitops.engine.spec import RepoSpec
from gitops.source import checkout, incremental
from gitops.source.git import Git

__all__ = ["Blobs", "load"]

Blobs = dict[str, incremental.Parsed]


async def load(
    git: Git, spec: RepoSpec, sha: str, blobs: Blobs, limits: Limits = DEFAULT
) -> tuple[list[Checked], Blobs]:
    """The checked entries of commit `sha` (in the cache: `Git.fetch`) under `spec.path`, and
    the entries of its blobs by sha, for the next call (`blobs`: the last call's).
    `gitops.engine.limits.LimitExceeded` when the revision is over one of `limits`."""
    listed = await git.files(spec.repo_url, sha, path=spec.path)
    if not listed:  # `path` missing, or a symlink on the way to it: the whole tree tells
        listed = await git.files(spec.repo_url, sha)
    files = await asyncio.to_thread(
        incremental.manifest_files, listed, spec.path, recurse=spec.recurse
    )
    if files is not None:
        incremental.check_listing(files, limits)
        read = await git.blobs(spec.repo_url, incremental.unread(files, blobs))
        return await asyncio.to_thread(incremental.assemble, files, blobs, read, limits)
    scratch = Path(git.cache_dir) / "checkouts"
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = await asyncio.to_thread(tempfile.mkdtemp, dir=scratch)
    try:
        root = await git.export(spec.repo_url, sha, Path(tmp, "tree"), path=spec.path)
        checked = await asyncio.to_thread(
            lambda: preflight(
                checkout.load_directory(root, spec.path, recurse=spec.recurse, limits=limits)
            )
        )
        return checked, {}
    finally:  # removing a big checkout must not block the event loop
        await asyncio.to_thread(shutil.rmtree, tmp, True)
