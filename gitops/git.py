"""Git through the git CLI, asynchronously: one cached bare clone per repository, fetch of one
revision, export of one commit into a directory.

Why the CLI and not a library: it speaks every transport and credential scheme users have, and
it is what they debug with. Every call is one sandboxed asyncio subprocess (`gitops.gitproc`:
its own process group, killed whole on timeout; no hooks, no helpers, no prompts; credentials
only through askpass or a 0600 key file). URLs and revisions are checked first
(`gitops.giturls`), and `--` goes before positional arguments wherever git accepts it: nothing
user-written can become an option.

Layout of the cache: `<cache_dir>/<sha256(normalized URL)[:24]>.git`, a bare repository with no
remote configured (every fetch names the URL); fetched commits are kept under
`refs/trainops/<sha>` so they survive `git gc`. A commit already present is never fetched again
(commits are immutable); branch and tag names are always resolved anew with `git ls-remote`.
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
from dataclasses import dataclass
from pathlib import Path

from gitops import gitcache, gitmessages, gitproc, gittree
from gitops.giturls import (
    FULL_SHA,
    SHA,
    Credentials,
    GitError,
    normalize_repo_url,
    quote,
    shown,
    split_url,
    validate_revision,
    validate_url,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Checkout",
    "Commit",
    "Git",
    "RemoteRef",
]

DEFAULT_TIMEOUT = 60.0
DEFAULT_CACHE_BYTES = 4 * 1024**3
"""The git cache's size cap: over it, the least recently used clones are deleted."""
log = logging.getLogger("trainops.gitops")


@dataclass(frozen=True)
class Commit:
    sha: str
    author_name: str
    author_email: str
    committer_date: str
    """ISO 8601 with offset, as `git log --format=%cI` prints it."""
    subject: str
    message: str


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


# --- the client ---------------------------------------------------------------------------------


class Git:
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

    def clone_dir(self, url: str) -> Path:
        """The bare clone of `url` (which need not exist yet)."""
        key = hashlib.sha256(normalize_repo_url(url).encode()).hexdigest()[:24]
        return self.cache_dir / f"{key}.git"

    async def ls_remote(
        self, url: str, credentials: Credentials | None = None
    ) -> tuple[dict[str, str], str | None]:
        """Every ref of the remote → sha (peeled tags as `refs/tags/x^{}`), and the branch
        HEAD points at (`refs/heads/main`), from `git ls-remote --symref`."""
        clean, creds = self._prepare(url, credentials)
        out = await self._run(
            ["ls-remote", "--symref", "--", clean],
            url=clean,
            creds=creds,
            what="list refs of",
            timeout=self.ls_remote_timeout,
        )
        refs: dict[str, str] = {}
        head: str | None = None
        for line in out.splitlines():
            left, _, name = line.partition("\t")
            if left.startswith("ref: "):
                if name == "HEAD":
                    head = left[len("ref: ") :].strip()
                continue
            if name:
                refs[name] = left.strip()
        return refs, head

    async def resolve(
        self, url: str, revision: str | None, credentials: Credentials | None = None
    ) -> RemoteRef:
        """The commit `revision` names on the remote now (None or "HEAD": the remote HEAD).

        A branch beats a tag of the same name; a full ref (`refs/heads/x`) is taken as is; a
        hex string that names no ref is a commit sha (full or abbreviated).
        """
        rev = validate_revision(revision)
        refs, head = await self.ls_remote(url, credentials)
        if rev == "HEAD":
            if "HEAD" not in refs:
                raise GitError(
                    f"revision not found: {shown(url)} has no HEAD (an empty repository?)"
                )
            return RemoteRef(head, refs["HEAD"])
        names = [rev] if rev.startswith("refs/") else [f"refs/heads/{rev}", f"refs/tags/{rev}"]
        for name in names:
            if name in refs:
                return RemoteRef(name, refs.get(name + "^{}", refs[name]))
        if SHA.match(rev):
            return RemoteRef(None, rev)
        raise GitError(f"revision not found: {quote(rev)} is no branch or tag of {shown(url)}")

    async def fetch(
        self, url: str, revision: str | None, credentials: Credentials | None = None
    ) -> tuple[RemoteRef, Commit]:
        """Resolve `revision` and make its commit present in the cached clone.

        A commit this client has already read from the clone, whose ref is still kept, costs
        the `ls-remote` alone: commits are immutable, and a poll that finds the branch where it
        was must not run three more git processes."""
        clean, creds = self._prepare(url, credentials)
        target = await self.resolve(url, revision, credentials)
        repo = self.clone_dir(clean)
        known = self._commits.get(str(repo), {}).get(target.sha)
        if known is not None and (repo / "HEAD").exists():
            with contextlib.suppress(OSError):
                os.utime(repo)  # last used: the cache's eviction order
            return RemoteRef(target.ref, known.sha), known
        async with self._repo(repo):
            await self._ensure_clone(repo)
            sha = await self._local_commit(repo, target.sha)
            fetched = sha is None
            if sha is None:
                sha = await self._fetch_into(repo, clean, creds, target)
                await self._housekeep(repo, sha)
            elif sha not in self._commits.get(str(repo), {}):  # kept by a ref from now on
                await self._record(repo, sha)
            commit = await self._commit(repo, sha)
            self._remember(repo, commit)
            with contextlib.suppress(OSError):
                os.utime(repo)  # last used: the cache's eviction order
        if fetched:
            await self._evict(keep={repo.name})
        return RemoteRef(target.ref, sha), commit

    async def checkout(
        self,
        url: str,
        revision: str | None,
        dest: str | os.PathLike[str],
        credentials: Credentials | None = None,
        *,
        path: str = ".",
    ) -> Checkout:
        """The files of `revision` written into the empty or absent directory `dest` (only
        those under `path` when it allows: `export`)."""
        ref, commit = await self.fetch(url, revision, credentials)
        root = await self.export(url, commit.sha, dest, path=path)
        return Checkout(commit, root, validate_revision(revision), ref.ref)

    async def export(
        self, url: str, sha: str, dest: str | os.PathLike[str], *, path: str = "."
    ) -> Path:
        """The files of commit `sha`, already in the cache (`fetch`), written into the empty or
        absent directory `dest`. Nothing is resolved again: a branch that moved since the fetch
        is not seen, so what is written is the commit the caller compares and records.

        Only the files under `path` are written, unless a symlink is on the way
        (`gittree.sparse_selection`). Symlinks are written as symlinks (`gitops.sources`
        ignores those leaving the tree); submodules are not checked out."""
        if not FULL_SHA.match(sha):
            raise GitError(f"cannot export {quote(sha)}: not a full commit sha")
        root = Path(dest)
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise GitError(f"cannot check out into {root}: the directory is not empty")
        repo = self.clone_dir(validate_url(url))
        fd, index = tempfile.mkstemp(prefix="trainops-index-", dir=self.cache_dir)
        os.close(fd)
        os.unlink(index)
        git_dir = ["--git-dir", str(repo)]
        try:
            async with self._repo(repo):
                if await self._local_commit(repo, sha) is None:
                    self._forget(repo, [sha])  # the next fetch fetches it again
                    raise GitError(f"commit {sha[:12]} is not in the cache of {shown(url)}")
                env = {"GIT_INDEX_FILE": index}
                await self._run([*git_dir, "read-tree", sha], env=env, what="read")
                listed = await self._run(
                    [*git_dir, "ls-files", "--stage", "-z"], env=env, what="read"
                )
                files = gittree.sparse_selection(gittree.parse_ls_files(listed), path)
                work = [*git_dir, "--work-tree", str(root), "checkout-index", "--force"]
                if files is None:
                    await self._run([*work, "--all"], env=env, what="check out")
                elif files:
                    data = "".join(f + "\0" for f in files).encode()
                    await self._run([*work, "-z", "--stdin"], env=env, what="check out", input=data)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(index)
        return root

    async def files(self, url: str, sha: str, *, path: str = ".") -> list[gittree.TreeEntry]:
        """The files of commit `sha` (already in the cache: `fetch`) under `path` (taken
        literally; the whole tree for the root, or a path with `..`), with their blob shas and
        sizes, from one `git ls-tree -r -l -z`: no checkout."""
        repo, sha = self.clone_dir(validate_url(url)), self._full_sha(sha)
        parts = gittree.path_parts(path)
        spec = ["--", "/".join(parts)] if parts else []
        args = ["--literal-pathspecs", "--git-dir", str(repo), "ls-tree", "-r", "-l", "-z"]
        async with self._repo(repo):
            out = await self._run_bytes(
                [*args, "--full-tree", sha, *spec],
                what="list the files of a commit",
            )
        return await asyncio.to_thread(gittree.parse_ls_tree, out)  # 10,000s of records

    async def blobs(self, url: str, shas: list[str]) -> dict[str, bytes]:
        """The content of each blob in `shas` (of a commit in the cache), read by one
        `git cat-file --batch`; a blob that is not there is left out."""
        repo = self.clone_dir(validate_url(url))
        if not shas:
            return {}
        data = "".join(self._full_sha(s) + "\n" for s in shas).encode()
        async with self._repo(repo):
            out = await self._run_bytes(
                ["--git-dir", str(repo), "cat-file", "--batch"],
                what="read the files of a commit",
                input=data,
            )
        return await asyncio.to_thread(gittree.parse_cat_file, out)

    # --- internals ------------------------------------------------------------------------------

    @staticmethod
    def _full_sha(sha: str) -> str:
        if not FULL_SHA.match(sha):
            raise GitError(f"cannot read {quote(sha)}: not a full sha")
        return sha

    async def _run_bytes(self, args: list[str], *, what: str, input: bytes | None = None) -> bytes:
        return await gitproc.run_bytes(
            args,
            git=self.git,
            timeout=self.timeout,
            extra_env=self.extra_env,
            known_hosts=self.cache_dir / "known_hosts",
            killed=self._killed,
            what=what,
            input=input,
        )

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
            credentials = Credentials(
                username=base.username or user,
                password=base.password or password,
                token=base.token,
                ssh_private_key=base.ssh_private_key,
            )
        return clean, credentials

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

    async def _local_commit(self, repo: Path, rev: str) -> str | None:
        try:
            out = await self._run(
                [
                    "--git-dir",
                    str(repo),
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    f"{rev}^{{commit}}",
                ],
                what="look up",
            )
        except GitError:
            return None
        sha = out.strip()
        return sha if FULL_SHA.match(sha) else None

    async def _fetch_into(
        self, repo: Path, url: str, creds: Credentials | None, target: RemoteRef
    ) -> str:
        base = ["--git-dir", str(repo), "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
        store = "refs/trainops/fetching"
        if target.ref is not None or FULL_SHA.match(target.sha):
            want = target.ref if target.ref is not None else target.sha
            try:
                await self._run(
                    [*base, "--depth=1", "--", url, f"+{want}:{store}"],
                    url=url,
                    creds=creds,
                    what="fetch",
                )
            except GitError as e:
                if gitmessages.shallow_refused(e.message):  # a dumb-HTTP remote: whole history
                    if target.ref is not None:
                        await self._run(
                            [*base, "--", url, f"+{want}:{store}"],
                            url=url,
                            creds=creds,
                            what="fetch",
                        )
                    else:
                        await self._fetch_all(repo, url, creds)
                elif target.ref is not None or "revision not found" not in e.message:
                    raise
                else:
                    await self._fetch_all(repo, url, creds)
        else:  # an abbreviated sha: only a full fetch can find it
            await self._fetch_all(repo, url, creds)
        sha = await self._local_commit(repo, store if target.ref is not None else target.sha)
        if sha is None and FULL_SHA.match(target.sha):
            sha = await self._local_commit(repo, target.sha)
        if sha is None:
            raise GitError(f"revision not found: no commit {quote(target.sha)} in {shown(url)}")
        await self._record(repo, sha)
        return sha

    async def _record(self, repo: Path, sha: str) -> None:
        """Keep `sha` under `refs/trainops/<sha>` (until `_housekeep` drops it)."""
        await self._run(
            ["--git-dir", str(repo), "update-ref", f"refs/trainops/{sha}", sha], what="record"
        )

    async def _fetch_all(self, repo: Path, url: str, creds: Credentials | None) -> None:
        await self._run(
            [
                "--git-dir",
                str(repo),
                "fetch",
                "--quiet",
                "--no-write-fetch-head",
                "--",
                url,
                "+refs/heads/*:refs/trainops/heads/*",
                "+refs/tags/*:refs/trainops/tags/*",
            ],
            url=url,
            creds=creds,
            what="fetch",
        )

    async def _commit(self, repo: Path, sha: str) -> Commit:
        out = await self._run(
            [
                "--git-dir",
                str(repo),
                "log",
                "-1",
                "--no-show-signature",
                "--format=%H%x00%an%x00%ae%x00%cI%x00%s%x00%B",
                sha,
                "--",
            ],
            what="read commit",
        )
        parts = out.split("\x00")
        if len(parts) < 6:
            raise GitError(f"cannot read commit {sha}")
        return Commit(
            sha=parts[0].strip(),
            author_name=parts[1],
            author_email=parts[2],
            committer_date=parts[3],
            subject=parts[4],
            message=parts[5].rstrip("\n"),
        )

    async def _run(
        self,
        args: list[str],
        *,
        url: str | None = None,
        creds: Credentials | None = None,
        env: Mapping[str, str] | None = None,
        what: str,
        input: bytes | None = None,
        timeout: float | None = None,
    ) -> str:
        """`gitproc.run` with this client's git, timeout (or `timeout`), environment and
        known_hosts file."""
        return await gitproc.run(
            args,
            git=self.git,
            timeout=self.timeout if timeout is None else timeout,
            extra_env=self.extra_env,
            known_hosts=self.cache_dir / "known_hosts",
            killed=self._killed,
            url=url,
            creds=creds,
            env=env,
            what=what,
            input=input,
        )
