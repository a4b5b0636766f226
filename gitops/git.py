"""Git through the git CLI, asynchronously: one cached bare clone per repository, fetch of one
revision, export of one commit into a directory.

Why the CLI and not a library: it speaks every transport and credential scheme users have, and
it is what they debug with. Every call is an asyncio subprocess (the event loop never blocks)
in its own process group, with a timeout that kills the whole group (git forks ssh and
remote helpers).

Safety, because `repoURL` and `targetRevision` come from users:
- a URL or revision starting with `-` is refused, revisions must pass `check-ref-format`'s rules
  (or be a hex sha), URLs must be one of the schemes below, and `--` goes before positional
  arguments wherever git accepts it: nothing user-written can become an option;
- `protocol.allow=never` with only https, http, ssh (and file, for file URLs) allowed back on:
  no `ext::` helpers; hooks go to /dev/null; no system or global config; no terminal prompts;
- credentials never appear on a command line, in a URL handed to git, in the environment of
  other processes, or in messages: HTTPS credentials reach git through a GIT_ASKPASS script
  reading variables set only for that subprocess; an SSH key through a 0600 temp file and
  `GIT_SSH_COMMAND`; userinfo in a URL is split off into credentials; every message is
  scrubbed of URL credentials (`gitops.redact`) and of the secret values themselves.

URLs: `https://`, `http://` (allowed; `is_insecure` says so, for a warning), `ssh://`,
scp-like `git@host:org/repo.git`, `file://`, and a plain local path (made `file://`).

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
import re
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from gitops import gitcache, gitmessages, gittree, redact

__all__ = [
    "DEFAULT_TIMEOUT",
    "Checkout",
    "Commit",
    "Credentials",
    "Git",
    "GitError",
    "RemoteRef",
    "is_insecure",
    "normalize_repo_url",
    "scrub",
    "validate_revision",
    "validate_url",
]

DEFAULT_TIMEOUT = 60.0
DEFAULT_CACHE_BYTES = 4 * 1024**3
"""The git cache's size cap: over it, the least recently used clones are deleted."""
log = logging.getLogger("trainops.gitops")
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SCP = re.compile(
    r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?P<path>[^\s]+)$"
)
_SCHEMES = ("https", "http", "ssh", "file")
_DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
_ENV_PASSTHROUGH = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
_ASKPASS = """#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$TRAINOPS_GIT_USERNAME" ;;
  *) printf '%s\\n' "$TRAINOPS_GIT_PASSWORD" ;;
esac
"""


class GitError(Exception):
    """A git operation failed; the message says what, in the user's terms, without secrets."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Credentials:
    """From the JobRepository's Secret: an SSH key, or username + password, or a token.

    A token is sent as the password of user `x-access-token` unless a username is given
    (GitHub and Gitea accept any user name with a token; GitLab wants one, any).
    """

    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    ssh_private_key: str | None = field(default=None, repr=False)

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password, self.token, self.ssh_private_key) if s)


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


# --- URLs and revisions (pure) ----------------------------------------------------------------


def validate_url(url: str) -> str:
    """The URL to hand git (userinfo removed; a local path made `file://`), or GitError."""
    clean, _, _ = _split_url(url)
    return clean


def is_insecure(url: str) -> bool:
    """Whether `url` is plain `http://` (credentials and content travel unencrypted)."""
    return url.strip().lower().startswith("http://")


def normalize_repo_url(url: str) -> str:
    """A canonical form for matching push webhooks to repositories.

    Lower-case scheme and host; no userinfo, default port, trailing slash or `.git`; scp-like
    `git@host:org/repo.git` becomes `ssh://host/org/repo`; a local path `file:///abs/path`.
    Never raises: an unparseable URL is returned stripped.
    """
    text = url.strip()
    scp = _SCP.match(text) if "://" not in text else None
    if scp is not None:
        text = f"ssh://{scp['host']}/{scp['path'].lstrip('/')}"
    elif "://" not in text:
        text = Path(os.path.abspath(text)).as_uri() if text else text
    try:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return text
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        host = f"{host}:{port}"
    if ":" in (parts.hostname or "") and parts.hostname:  # IPv6 literal
        host = f"[{host}]"
    path = parts.path.rstrip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    path = path.rstrip("/")
    return urlunsplit((scheme, host, path, "", ""))


def validate_revision(revision: str | None) -> str:
    """`HEAD` for none; else the revision if it is a hex sha or a valid ref name, or GitError."""
    if revision is None or revision.strip() == "" or revision == "HEAD":
        return "HEAD"
    if _SHA.match(revision):
        return revision.lower()
    problem = _ref_format_problem(revision)
    if problem:
        raise GitError(f"invalid revision {_quote(revision)}: {problem}")
    return revision


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with URL credentials masked (`gitops.redact.redact`: userinfo, secret query
    parameters) and without any of `secrets`."""
    text = redact.redact(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
            for line in secret.splitlines():
                if len(line.strip()) >= 8:
                    text = text.replace(line.strip(), "***")
    return text


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
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.max_cache_bytes = max_cache_bytes
        self.timeout = timeout
        self.git = git
        self.extra_env = dict(env or {})
        self._locks: dict[str, asyncio.Lock] = {}
        self._killed: set[str] = set()
        """Clones a git of ours was killed working on (its lock files are stale)."""

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
            ["ls-remote", "--symref", "--", clean], url=clean, creds=creds, what="list refs of"
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
                    f"revision not found: {_shown(url)} has no HEAD (an empty repository?)"
                )
            return RemoteRef(head, refs["HEAD"])
        names = [rev] if rev.startswith("refs/") else [f"refs/heads/{rev}", f"refs/tags/{rev}"]
        for name in names:
            if name in refs:
                return RemoteRef(name, refs.get(name + "^{}", refs[name]))
        if _SHA.match(rev):
            return RemoteRef(None, rev)
        raise GitError(f"revision not found: {_quote(rev)} is no branch or tag of {_shown(url)}")

    async def fetch(
        self, url: str, revision: str | None, credentials: Credentials | None = None
    ) -> tuple[RemoteRef, Commit]:
        """Resolve `revision` and make its commit present in the cached clone."""
        clean, creds = self._prepare(url, credentials)
        target = await self.resolve(url, revision, credentials)
        repo = self.clone_dir(clean)
        async with self._repo(repo):
            await self._ensure_clone(repo)
            sha = await self._local_commit(repo, target.sha)
            fetched = sha is None
            if sha is None:
                sha = await self._fetch_into(repo, clean, creds, target)
                await self._housekeep(repo, sha)
            commit = await self._commit(repo, sha)
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
        if not _FULL_SHA.match(sha):
            raise GitError(f"cannot export {_quote(sha)}: not a full commit sha")
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
                    raise GitError(f"commit {sha[:12]} is not in the cache of {_shown(url)}")
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

    # --- internals ------------------------------------------------------------------------------

    def _prepare(self, url: str, credentials: Credentials | None) -> tuple[str, Credentials | None]:
        clean, user, password = _split_url(url)
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
        return sha if _FULL_SHA.match(sha) else None

    async def _fetch_into(
        self, repo: Path, url: str, creds: Credentials | None, target: RemoteRef
    ) -> str:
        base = ["--git-dir", str(repo), "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
        store = "refs/trainops/fetching"
        if target.ref is not None or _FULL_SHA.match(target.sha):
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
        if sha is None and _FULL_SHA.match(target.sha):
            sha = await self._local_commit(repo, target.sha)
        if sha is None:
            raise GitError(f"revision not found: no commit {_quote(target.sha)} in {_shown(url)}")
        await self._run(
            ["--git-dir", str(repo), "update-ref", f"refs/trainops/{sha}", sha], what="record"
        )
        return sha

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
    ) -> str:
        secrets = creds.secrets() if creds else ()
        with tempfile.TemporaryDirectory(prefix="trainops-git-") as tmp:
            full_env = self._env(Path(tmp), url, creds)
            full_env.update(env or {})
            cmd = [self.git, *self._config(url), *args]
            try:
                proc = await asyncio.create_subprocess_exec(
                    *cmd,
                    stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=full_env,
                    start_new_session=True,
                )
            except OSError as e:
                raise GitError(f"cannot run git: {e.strerror}") from None
            try:
                async with asyncio.timeout(self.timeout):  # not wait_for: see kube.leader
                    out, err = await proc.communicate(input)
            except (TimeoutError, asyncio.CancelledError) as e:
                _kill_group(proc)
                if "--git-dir" in args:  # its lock files are stale now: `_repo` removes them
                    self._killed.add(args[args.index("--git-dir") + 1])
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        await proc.wait()
                if isinstance(e, asyncio.CancelledError):
                    raise
                target = f" {_shown(url)}" if url else ""
                raise GitError(
                    f"git timed out after {self.timeout:g} s trying to {what}{target}"
                ) from None
        if proc.returncode != 0:
            text = scrub(err.decode("utf-8", "replace"), secrets)
            raise GitError(gitmessages.explain(text, what, f" {_shown(url)}" if url else ""))
        return out.decode("utf-8", "replace")

    def _config(self, url: str | None) -> list[str]:
        config = [
            "protocol.allow=never",
            "protocol.https.allow=always",
            "protocol.http.allow=always",
            "protocol.ssh.allow=always",
            "core.hooksPath=/dev/null",
            "credential.helper=",
            "core.askPass=",
            "advice.detachedHead=false",
            "gc.auto=0",
        ]
        if url is not None and url.startswith("file://"):
            config.append("protocol.file.allow=always")
        out: list[str] = []
        for item in config:
            out += ["-c", item]
        return out

    def _env(self, tmp: Path, url: str | None, creds: Credentials | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
        env.update(self.extra_env)
        env.update(
            {
                "HOME": str(tmp),
                "XDG_CONFIG_HOME": str(tmp),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_ASKPASS": "/bin/false",
                "SSH_ASKPASS": "/bin/false",
                "LC_ALL": "C",
            }
        )
        if creds is None:
            return env
        if creds.ssh_private_key:
            key = tmp / "id"
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(creds.ssh_private_key.rstrip("\n") + "\n")
            known = self.cache_dir / "known_hosts"
            env["GIT_SSH_COMMAND"] = (
                f"ssh -i {_sh(str(key))} -o IdentitiesOnly=yes -o BatchMode=yes "
                f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={_sh(str(known))}"
            )
        password = creds.password or creds.token
        if password:
            askpass = tmp / "askpass.sh"
            askpass.write_text(_ASKPASS)
            askpass.chmod(stat.S_IRWXU)
            env["GIT_ASKPASS"] = str(askpass)
            env["TRAINOPS_GIT_USERNAME"] = creds.username or "x-access-token"
            env["TRAINOPS_GIT_PASSWORD"] = password
        return env


# --- helpers ------------------------------------------------------------------------------------


def _split_url(url: str) -> tuple[str, str | None, str | None]:
    """(URL for git without userinfo, username, password) or GitError."""
    if not isinstance(url, str) or not url.strip():
        raise GitError("no repository URL given")
    text = url.strip()
    if text.startswith("-"):
        raise GitError(f"refusing repository URL {_quote(scrub(text))}: it starts with '-'")
    if any(ord(c) < 0x20 or c == "\x7f" for c in text) or " " in text:
        raise GitError("refusing repository URL: it contains whitespace or control characters")
    if "::" in text.split("/", 1)[0]:  # `ext::cmd`, `fd::0`: git's remote-helper syntax
        raise GitError(f"unsupported repository URL {_quote(scrub(text))}")
    if "://" not in text:
        scp = _SCP.match(text)
        if scp is not None and not text.startswith(("/", ".")):
            if scp["path"].startswith("-") or scp["host"].startswith("-"):
                raise GitError(f"refusing repository URL {_quote(scrub(text))}")
            return text, None, None  # ssh user in scp form is not a secret
        return Path(os.path.abspath(text)).as_uri(), None, None
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError:
        raise GitError(f"invalid repository URL {_quote(scrub(text))}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise GitError(
            f"unsupported repository URL scheme {scheme!r}: use https, http, ssh or file"
        )
    if scheme != "file" and not parts.hostname:
        raise GitError(f"invalid repository URL {_quote(scrub(text))}: no host")
    if (parts.hostname or "").startswith("-") or parts.path.startswith("-"):
        raise GitError(f"refusing repository URL {_quote(scrub(text))}")
    user, password = parts.username, parts.password
    if scheme == "ssh":  # ssh://git@host/…: the user is part of the address, not a secret
        return text, None, None
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((scheme, netloc, parts.path, parts.query, "")), user, password


def _ref_format_problem(ref: str) -> str:
    """What `git check-ref-format --allow-onelevel` would object to, or ""."""
    if ref.startswith("-"):
        return "it starts with '-'"
    if len(ref) > 255:
        return "it is too long"
    if any(ord(c) < 0x20 or c == "\x7f" for c in ref):
        return "it contains control characters"
    for bad in (" ", "~", "^", ":", "?", "*", "[", "\\"):
        if bad in ref:
            return f"it contains {bad!r}"
    if ".." in ref or "@{" in ref or "//" in ref:
        return "it contains '..', '@{' or '//'"
    if ref == "@" or ref.endswith((".", "/", ".lock")) or ref.startswith("/"):
        return "it is not a valid ref name"
    if any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/")):
        return "a component starts with '.' or ends with '.lock'"
    return ""


def _shown(url: str | None) -> str:
    return scrub(url or "")


def _quote(text: str) -> str:
    text = text if len(text) <= 80 else text[:77] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
