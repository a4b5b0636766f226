"""The git cache's machinery under `gitops.source.git.Git`: the bare clones on disk, one lock per clone
(stale lock files removed first), every git process bounded (`gitops.source.process`), the commits a
clone's refs keep (remembered for `fetch`'s fast path), and housekeeping — refs of all but the
newest commits dropped, `git gc --auto`, the least recently used clones evicted over the size
cap. Split from `gitops/source/git.py`, which keeps the verbs (ls-remote, resolve, fetch, checkout,
export, files, blobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Required, TypedDict, Unpack

from gitops.engine.records import Commit
from gitops.engine.urls import FULL_SHA, Credentials, GitError, normalize_repo_url, quote, split_url
from gitops.source import diskcache as gitcache
from gitops.source import process as gitproc
from gitops.source import tree as gittree
from gitops.source.advertisement import RefReader

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_TIMEOUT", "Checkout", "Clones", "RemoteRef"]

DEFAULT_TIMEOUT = 60.0
DEFAULT_CACHE_BYTES = 4 * 1024**3
"""The git cache's size cap: over it, the least recently used clones are deleted."""
log = logging.getLogger("trainops.gitops")


@dataclass(frozen=True)
class RemoteRef:
    """What a revision resolved to: the full ref (None for a bare sha) and the commit."""

    ref: str | None
    sha: str


@dataclass(frozen=True)
class Checkout:
    """One commit's files under `root`."""

    commit: Commit
    root: Path
    revision: str
    """What was asked for (`main`, `v1.2`, a sha, or `HEAD`)."""
    ref: str | None


class _RunOptions(TypedDict, total=False):
    """What one git run may add to a client's own settings (`gitproc.run_bytes`)."""

    what: Required[str]
    url: str | None
    creds: Credentials | None
    env: Mapping[str, str] | None
    input: bytes | None


class Clones:
    """Cached clones under `cache_dir`; every git call bounded by `timeout` seconds.

    `env` adds variables to every git process (a proxy, or `GIT_SSH_COMMAND` in tests); our own
    settings win over it. Calls for the same repository are serialised (one lock per clone).
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        git: str = "git",
        env: Mapping[str, str] | None = None,
        max_cache_bytes: int = DEFAULT_CACHE_BYTES,
        ls_remote_timeout: float | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.max_cache_bytes = max_cache_bytes
        self.timeout = timeout
        self.ls_remote_timeout = timeout if ls_remote_timeout is None else ls_remote_timeout
        """`ls-remote` (a round's first, cheap step) has its own, shorter bound: a remote that
        does not answer costs this, not the fetch's `timeout`."""
        self.git = git
        self.extra_env = dict(env or {})
        self._locks: dict[str, asyncio.Lock] = {}
        self._killed: set[str] = set()
        """Clones a git of ours was killed working on (its lock files are stale)."""
        self._commits: dict[str, dict[str, Commit]] = {}
        """Per clone, the commits read from it that its refs keep (`fetch`'s fast path)."""
        self._refs = RefReader()
        """Anonymous http(s) remotes' refs, read in-process (`Git.ls_remote`)."""

    async def close(self) -> None:
        """Close the HTTP session of in-process ref reads (git processes end with each call)."""
        await self._refs.close()

    def clone_dir(self, url: str) -> Path:
        """The bare clone of `url` (which need not exist yet)."""
        key = hashlib.sha256(normalize_repo_url(url).encode()).hexdigest()[:24]
        return self.cache_dir / f"{key}.git"

    async def _run(
        self, args: list[str], *, timeout: float | None = None, **options: Unpack[_RunOptions]
    ) -> str:
        """`_run_bytes`, its output decoded (UTF-8, undecodable bytes replaced)."""
        out = await self._run_bytes(args, timeout=timeout, **options)
        return out.decode("utf-8", "replace")

    async def _run_bytes(
        self, args: list[str], *, timeout: float | None = None, **options: Unpack[_RunOptions]
    ) -> bytes:
        """`gitproc.run_bytes` with this client's git, timeout (or `timeout`), environment and
        known_hosts file."""
        return await gitproc.run_bytes(
            args,
            git=self.git,
            timeout=self.timeout if timeout is None else timeout,
            extra_env=self.extra_env,
            known_hosts=self.cache_dir / "known_hosts",
            killed=self._killed,
            **options,
        )

    @staticmethod
    def _full_sha(sha: str) -> str:
        if not FULL_SHA.match(sha):
            raise GitError(f"cannot read {quote(sha)}: not a full sha")
        return sha

    @contextlib.asynccontextmanager
    async def _repo(self, repo: Path) -> AsyncIterator[None]:
        """Hold the clone's lock (calls per clone are serialised), first removing the lock
        files a killed git left in it (`gittree.stale_locks`)."""
        async with self._locks.setdefault(str(repo), asyncio.Lock()):
            killed = str(repo) in self._killed
            self._killed.discard(str(repo))
            if repo.is_dir():
                removed = await asyncio.to_thread(
                    gitcache.remove_stale_locks, repo, time.time(), self.timeout, killed
                )
                for path in removed:
                    log.warning(
                        "git cache %s: removed the stale lock %s (%s)",
                        repo.name,
                        path,
                        "left by a git we killed" if killed else "older than the git timeout",
                    )
            yield

    async def _ensure_clone(self, repo: Path) -> None:
        if (repo / "HEAD").exists():
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=repo.name + ".", dir=self.cache_dir))
        try:
            await self._run(["init", "--bare", "--quiet", "--", str(tmp)], what="create")
            os.replace(tmp, repo)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _remember(self, repo: Path, commit: Commit) -> None:
        known = self._commits.setdefault(str(repo), {})
        known.pop(commit.sha, None)
        known[commit.sha] = commit
        while len(known) > gittree.KEEP_COMMITS:  # the oldest read first
            known.pop(next(iter(known)))

    def _forget(self, repo: Path, shas: list[str] | None = None) -> None:
        if shas is None:
            self._commits.pop(str(repo), None)
            return
        for sha in shas:
            self._commits.get(str(repo), {}).pop(sha, None)

    def _prepare(self, url: str, credentials: Credentials | None) -> tuple[str, Credentials | None]:
        clean, user, password = split_url(url)
        if user is not None or password is not None:
            base = credentials or Credentials()
            credentials = replace(
                base, username=base.username or user, password=base.password or password
            )
        return clean, credentials

    async def _evict(self, keep: set[str]) -> None:
        """Delete the least recently used clones while the cache is over its size cap
        (`gittree.clones_to_evict`), each under its own lock, skipping any in use."""
        clones = await asyncio.to_thread(gitcache.clone_sizes, self.cache_dir)
        for name in gittree.clones_to_evict(clones, cap=self.max_cache_bytes, keep=keep):
            lock = self._locks.setdefault(str(self.cache_dir / name), asyncio.Lock())
            if lock.locked():
                continue
            async with lock:
                self._forget(self.cache_dir / name)
                log.warning("git cache: removed the clone %s (the cache is over its cap)", name)
                await asyncio.to_thread(shutil.rmtree, self.cache_dir / name, True)

    async def _housekeep(self, repo: Path, sha: str) -> None:
        """After a fetch: drop the refs of all but the newest commits (`gittree.refs_to_drop`)
        and let `git gc --auto` pack and prune what no ref needs any more."""
        out = await self._run(
            [
                "--git-dir",
                str(repo),
                "for-each-ref",
                "--format=%(refname) %(committerdate:unix)",
                "refs/trainops/",
            ],
            what="list refs of the cache of",
        )
        refs = []
        for line in out.splitlines():
            name, _, when = line.partition(" ")
            refs.append((name, int(when) if when.isdigit() else 0))
        drop = gittree.refs_to_drop(refs, keep=[sha])
        self._forget(repo, [ref.rsplit("/", 1)[-1] for ref in drop])
        if drop:
            data = "".join(f"delete {ref}\n" for ref in drop).encode()
            await self._run(
                ["--git-dir", str(repo), "update-ref", "--stdin"], what="prune refs", input=data
            )
        await self._run(
            [
                "--git-dir",
                str(repo),
                "-c",
                "gc.auto=6700",
                "-c",
                "gc.autoDetach=false",
                "-c",
                "gc.pruneExpire=now",
                "gc",
                "--auto",
                "--quiet",
            ],
            what="collect garbage in",
        )
