"""The fetch and read stage of a round (I/O: git, the repository's Secret): the commit a
JobRepository's revision resolves to, and its manifests read, checked and bounded into the
repository's `memo.Source` — read again only for a new commit, path, recursion or
destination. `gitops.runtime.reconciler` turns what goes wrong here (GitError, SourcesError,
LimitExceeded) into the repository's ComparisonError."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

from gitops.engine import limits as repo_limits
from gitops.engine import tenancy, triggers
from gitops.engine.records import Commit
from gitops.engine.spec import RepoSpec
from gitops.engine.urls import Credentials, GitError
from gitops.runtime.acting import Tenants
from gitops.runtime.memo import Source
from gitops.source import reading
from gitops.source.git import Git

__all__ = ["Fetcher", "RepeatedRefusal"]


class RepeatedRefusal(repo_limits.LimitExceeded):
    """The revision refused last round, under the same limits: said already."""


class Fetcher:
    def __init__(self, git: Git, tenants: Tenants, limits: repo_limits.Limits) -> None:
        self.git = git
        self.tenants = tenants
        self.limits = limits

    async def fetch(
        self,
        obj: dict[str, Any],
        spec: RepoSpec,
        revision: str | None,
        source: Source,
        requested_revision: str | None = None,
    ) -> tuple[Commit, bool]:
        """The commit to compare with, its manifests checked into `source`, and whether the
        comparison must be made again for the same commit (its namespaces' Pod Security levels
        changed since). Raises GitError, `checkout.SourcesError` or `LimitExceeded`
        (`RepeatedRefusal` for the same refusal)."""
        await self.tenants.admit(obj, spec)
        creds = await self._credentials(obj, spec)
        if requested_revision is not None and spec.automated:
            await self._target_only(spec, requested_revision, creds)
        # The Pod Security levels are read every round; those of the commit checked last (most
        # rounds' commit: a poll or a push that moved nothing) are read while it is resolved.
        before = source.checked_for
        ahead = (
            asyncio.ensure_future(self.tenants.levels(self.tenants.job_namespaces(spec, source)))
            if before is not None
            else None
        )
        try:
            commit, wanted = await self._read(
                obj, spec, revision, source, creds, requested_revision
            )
            # Another commit or destination was checked: other namespaces, maybe.
            levels = await ahead if ahead is not None and before == wanted else None
        finally:
            await _cancel(ahead)
        # The Pod Security step, every round: a namespace's label may change without a commit.
        again = await self.tenants.pod_security(spec, source, wanted, levels)
        return commit, again

    async def _read(
        self,
        obj: dict[str, Any],
        spec: RepoSpec,
        revision: str | None,
        source: Source,
        creds: Credentials | None,
        requested_revision: str | None,
    ) -> tuple[Commit, tuple[str, str, bool, str]]:
        """The commit `revision` resolves to, its manifests read, checked and bounded into
        `source` unless they are there already; and what they were checked for."""
        ref, commit = await self.git.fetch(spec.repo_url, revision, creds)
        if requested_revision is not None and not (spec.automated or spec.allow_any_revision):
            await self._reachable(spec, requested_revision, commit.sha, creds)
        if revision is None:
            source.head_ref = ref.ref
        wanted = (commit.sha, spec.path, spec.recurse, spec.destination)
        if source.refused is not None and source.refused[0] == wanted:
            raise RepeatedRefusal(source.refused[1])  # the same revision, the same limits
        if source.checked_for != wanted:
            try:
                loaded, source.blobs = await reading.load(
                    self.git, spec, commit.sha, source.blobs, self.limits
                )
            except repo_limits.LimitExceeded as exc:
                source.refused = (wanted, exc.exceeded)
                raise
            source.refused = None
            source.bounded, source.cluster_scoped = await self.tenants.bounded(obj, spec, loaded)
            source.checked_for, source.commit = wanted, commit
            source.levels_for = None
        return commit, wanted

    async def _target_only(self, spec: RepoSpec, revision: str, creds: Credentials | None) -> None:
        """An automated repository syncs only what targetRevision resolves to: the API refuses
        another revision, and so does the leader, for a `sync-revision` annotation written with
        kubectl (`refs/pull/7/head` must not be applied, even once). GitError otherwise."""
        asked = await self.git.resolve(spec.repo_url, revision, creds)
        target = await self.git.resolve(spec.repo_url, spec.target_revision, creds)
        if not target.sha.lower().startswith(asked.sha.lower()):
            raise GitError(
                "not the target: the repository has an automated sync policy and follows "
                f"{spec.target_revision or 'HEAD'}; change "
                "spec.targetRevision, or turn automated sync off, to sync another revision"
            )

    async def _reachable(
        self, spec: RepoSpec, revision: str, sha: str, creds: Credentials | None
    ) -> None:
        """A requested revision (the `sync-revision` annotation: `patch` on the JobRepository
        is enough to write it, while changing the spec needs `impersonate` on its account) may
        only pick a commit of targetRevision's history: a pull request's head or another
        branch would otherwise be applied as the repository's account, and a sha another
        repository of the same URL fetched into the shared clone would be read without this
        repository's remote serving it. `spec.syncPolicy.allowAnyRevision` lifts it. GitError
        otherwise, before anything is read."""
        target = await self.git.resolve(spec.repo_url, spec.target_revision, creds)
        if await self.git.reachable(spec.repo_url, sha, target, creds):
            return
        follows = spec.target_revision or "HEAD"
        raise GitError(
            f"refused (annotation {triggers.SYNC_REVISION}): commit {sha[:12]} is not in the "
            f"history of {follows} (spec.targetRevision), so it is not synced; set "
            "spec.syncPolicy.allowAnyRevision: true to sync any revision on request"
        )

    async def _credentials(self, obj: dict[str, Any], spec: RepoSpec) -> Credentials | None:
        if not spec.secret_name:
            return None
        namespace = str((obj.get("metadata") or {}).get("namespace", ""))
        secret = await self.tenants.secret(obj, spec)  # as the repository's ServiceAccount
        raw = secret.get("data") or {}
        data: dict[str, str] = {}
        for name in ("username", "password", "token", "sshPrivateKey", "knownHosts", "known_hosts"):
            if raw.get(name):
                try:
                    data[name] = base64.b64decode(raw[name]).decode()
                except (ValueError, UnicodeDecodeError):
                    raise GitError(
                        f"secret {namespace}/{spec.secret_name} (secretRef): key {name} is not "
                        "UTF-8 text"
                    ) from None
        return Credentials(
            username=data.get("username"),
            password=data.get("password"),
            token=data.get("token"),
            ssh_private_key=data.get("sshPrivateKey"),
            bound_to=tenancy.secret_binding(secret, spec.repo_url),
            known_hosts=data.get("knownHosts") or data.get("known_hosts"),
        )


async def _cancel(task: asyncio.Future[Any] | None) -> None:
    """Stop `task` unless it is over; an exception it ended with counts as seen."""
    if task is None:
        return
    if task.done():
        if not task.cancelled():
            task.exception()
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
