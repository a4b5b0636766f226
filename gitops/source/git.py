"""Git through the git CLI, asynchronously: one cached bare clone per repository, fetch of one
revision, export of one commit into a directory.

Why the CLI and not a library: it speaks every transport and credential scheme users have, and
it is what they debug with. Every call is one sandboxed asyncio subprocess (`gitops.source.process`:
its own process group, killed whole on timeout; no hooks, no helpers, no prompts; credentials
only through a credential helper bound to their URL, or a 0600 key file). URLs and revisions are checked first
(`gitops.engine.urls`), and `--` goes before positional arguments wherever git accepts it: nothing
user-written can become an option.

Layout of the cache: `<cache_dir>/<sha256(normalized URL)[:24]>.git`, a bare repository with no
remote configured (every fetch names the URL); fetched commits are kept under
`refs/trainops/<sha>` so they survive `git gc`. A commit already present is never fetched again
(commits are immutable); branch and tag names are always resolved anew with `git ls-remote` —
for an anonymous http(s) remote by one in-process GET of the same ref advertisement
(`gitops.source.advertisement`), which leaves to git anything it does not read exactly as git.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path

from gitops.engine.records import Commit
from gitops.engine.urls import (
    FULL_SHA,
    SHA,
    Credentials,
    GitError,
    quote,
    shown,
    validate_revision,
    validate_url,
)
from gitops.source import advertisement
from gitops.source import messages as gitmessages
from gitops.source import tree as gittree
from gitops.source.clones import DEFAULT_TIMEOUT, Checkout, Clones, RemoteRef

__all__ = [
    "DEFAULT_TIMEOUT",
    "Checkout",
    "Commit",
    "Git",
    "RemoteRef",
]


class Git(Clones):
    """Cached clones under `cache_dir`; every git call bounded by `timeout` seconds.

    `env` adds variables to every git process (a proxy, or `GIT_SSH_COMMAND` in tests); our own
    settings win over it. Calls for the same repository are serialised (one lock per clone).
    """

    async def ls_remote(
        self, url: str, credentials: Credentials | None = None
    ) -> tuple[dict[str, str], str | None]:
        """Every ref of the remote → sha (peeled tags as `refs/tags/x^{}`), and the branch
        HEAD points at (`refs/heads/main`), from `git ls-remote --symref` — or, for an anonymous
        http(s) remote, from the same advertisement read in-process (`gitops.source.advertisement`:
        it leaves anything unusual to git)."""
        clean, creds = self._prepare(url, credentials)
        if creds is None and advertisement.usable(clean, self.extra_env):
            found = await self._refs.read(
                clean, self.ls_remote_timeout, advertisement.tls_for(self.extra_env)
            )
            if found is not None:
                return found
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
        (`gittree.sparse_selection`). Symlinks are written as symlinks (`gitops.source.checkout`
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

    async def reachable(
        self, url: str, sha: str, target: RemoteRef, credentials: Credentials | None = None
    ) -> bool:
        """Whether commit `sha` (already in the cache: `fetch`) is `target`'s commit or in its
        history as the remote serves it now. The target's whole history is fetched for it
        (the clone made complete first when a shallow fetch left it shallow), with this
        repository's credentials: a commit another repository of the same URL fetched into the
        shared clone, or one the remote no longer serves on the target, is not reachable."""
        clean, creds = self._prepare(url, credentials)
        repo = self.clone_dir(clean)
        async with self._repo(repo):
            await self._ensure_clone(repo)
            args = [
                "--git-dir",
                str(repo),
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
            ]
            if (repo / "shallow").exists():
                args.append("--unshallow")
            if target.ref is not None:
                specs = [f"+{target.ref}:refs/trainops/reach"]
            else:  # a sha: what the remote's branches and tags hold
                specs = ["+refs/heads/*:refs/trainops/heads/*", "+refs/tags/*:refs/trainops/tags/*"]
            await self._run([*args, "--", clean, *specs], url=clean, creds=creds, what="fetch")
            if target.ref is not None:
                tip = await self._local_commit(repo, "refs/trainops/reach")
            else:
                tip = await self._local_commit(repo, target.sha)
            if tip is None:
                return False
            try:
                base = await self._run(
                    ["--git-dir", str(repo), "merge-base", sha, tip], what="compare"
                )
            except GitError:  # no common history (exit 1), or not there: not reachable
                return False
        return base.strip() == sha

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
