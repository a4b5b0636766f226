"""One reconcile of one JobRepository: fetch, read, pre-flight, compare, sync, write status.

Level-triggered like the job controller (`controller/reconciler.py`): the key is
`namespace/name`, the JobRepository is read fresh, and the answer is when to look again (the
polling `interval`, or sooner for a retry). Per repository, a `Memo` in memory keeps what the
last round saw, so a round where neither the revision, the spec nor any of its own live
objects changed (`gitops.livestate`'s stamp) does no work at all — only `git ls-remote`, O(1)
reads of the shared cache, and a list by the uid label per kind it keeps outside the cache;
a commit is read and pre-checked once, and only its blobs not read before
(`gitops.incremental`); `compare` diffs only what changed since the last comparison.

When to sync (docs/GITOPS.md, "Sync semantics"): always when asked (`request_sync`); with an
automated policy, once per new revision (history gets an entry), and — with `selfHeal` — again
whenever a live object drifts or disappears; after a failed apply, again after the retry
back-off while `syncPolicy.retry.limit` allows. Pre-flight denials are not retried (the same
commit gives the same answer) but are recorded on their resource with file:line.

A repository that cannot be fetched, or whose `path` is missing, keeps its last synced state:
only the ComparisonError condition changes (cleared by the next good fetch). A requested sync
is one-shot (a revision that cannot be fetched is an operation in phase Error); after a
restart the recorded status says what was synced last. Any other exception of a round is a
ComparisonError/SyncError condition, logged once, retried with back-off.

Tenancy (`gitops.acting`, rules in `gitops.tenancy`): before any request of its round the
repository's identity is settled and its URL checked; live reads, applies, prunes and the
`secretRef` read go through the engine of that identity; refused manifests are entry errors.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gitops import (
    guards,
    keys,
    operations,
    ownership,
    reading,
    report,
    sources,
    status,
    tenancy,
    triggers,
)
from gitops.acting import Tenants
from gitops.compare import Comparison, compare
from gitops.crd import JOB_REPOSITORIES
from gitops.discovery import Discovery
from gitops.git import Commit, Git
from gitops.giturls import Credentials, GitError
from gitops.livecache import LiveCache
from gitops.livestate import State
from gitops.memo import Memo
from gitops.metrics import GitOpsMetrics
from gitops.pairing import ResourceKey
from gitops.spec import RepoSpec, read_spec, repo_id
from gitops.statuswrite import write_status
from gitops.sync import PRUNED, SYNCED, SyncEngine
from kube import errors, resources
from kube.client import Client
from kube.workqueue import default_rate_limiter

__all__ = ["DEFAULT_KINDS", "JOB_REPOSITORIES", "LEGACY_KINDS", "LOGGER", "Emit", "Reconciler"]

LOGGER = "trainops.gitops"
"""The logger of syncs, denials and admissions (`trainops up` shows it at INFO)."""
log = logging.getLogger(LOGGER)

DEFAULT_KINDS: frozenset[tuple[str, str]] = frozenset(
    (r.api_version, r.kind) for r in (resources.TFJOBS, resources.XGBJOBS)
)
"""Kinds always searched for tracked objects (prune candidates), besides those in Git now,
those this process has applied and those the status records (`appliedKinds`): the training
jobs, which the shared cache serves without a request."""
LEGACY_KINDS: frozenset[tuple[str, str]] = DEFAULT_KINDS | frozenset(
    (r.api_version, r.kind)
    for r in (
        resources.CONFIGMAPS,
        resources.SECRETS,
        resources.SERVICES,
        resources.DEPLOYMENTS,
        resources.NAMESPACES,
    )
)
"""The default kinds before `appliedKinds` recorded them: the first round after a start also
lists these (and the repository's own kinds) by the managed label (`gitops.livestate`)."""

Emit = Callable[[dict[str, Any], str, str, str], None]
"""(object, type, reason, message): an Event to record, buffered by the caller."""


class Reconciler:
    def __init__(
        self,
        client: Client,
        git: Git,
        emit: Emit,
        metrics: GitOpsMetrics,
        *,
        clock: Callable[[], datetime] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        boundaries: tenancy.Boundaries | None = None,
        live_cache: LiveCache | None = None,
    ) -> None:
        self.client = client
        self.git = git
        self.emit = emit
        self.metrics = metrics
        self.discovery = Discovery(client)
        self.engine = SyncEngine(client, self.discovery, cache=live_cache)
        """The reconciler's own identity (repositories acting as it, and discovery)."""
        self.tenants = Tenants(
            client, self.discovery, self.engine, boundaries or tenancy.Boundaries()
        )
        self.clock = clock or (lambda: datetime.now(UTC))
        self.monotonic = monotonic
        self.memos: dict[str, Memo] = {}
        self.error_backoff = default_rate_limiter()

    def memo(self, key: str) -> Memo:
        return self.memos.setdefault(key, Memo())

    async def reconcile(self, key: str) -> float | None:
        """One round; an unexpected exception becomes a ComparisonError or SyncError condition
        (logged with its traceback once) and the round is retried with back-off."""
        try:
            requeue = await self._round(key)
        except errors.APIError:
            raise  # expected now and then: the work queue warns and retries
        except Exception as exc:
            return await self._round_failed(key, exc)
        finally:
            if key in self.memos:
                self.memos[key].handling = None
        self.error_backoff.forget(key)
        if key in self.memos:
            self.memos[key].failure = None
        return requeue

    async def _round(self, key: str) -> float | None:
        namespace, name = key.split("/", 1)
        try:
            obj = await self.client.get(JOB_REPOSITORIES, name, namespace)
        except errors.NotFound:
            self.memos.pop(key, None)
            return None
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        spec = read_spec(obj)
        memo = self.memo(key)
        memo.stage = status.COMPARISON_ERROR
        if memo.synced_revision is None:  # a restart: what the status says was synced last
            memo.synced_revision = status.last_synced_revision(obj.get("status") or {})
        if not memo.kinds:  # a restart: the kinds it applied (a Role gone from Git is pruned)
            memo.kinds = status.applied_kinds(obj.get("status") or {})
        # Requests written to the object (any replica's API, kubectl): `gitops.triggers`.
        # Whatever this round writes to status records them as handled (`_write_status`).
        asked = triggers.pending(obj)
        memo.handling = asked if asked.any else None
        if asked.refresh:
            memo.refresh = True
        if asked.sync:
            memo.sync_requested, memo.sync_revision = True, asked.revision
        requested, revision = memo.sync_requested, memo.sync_revision
        memo.sync_requested, memo.sync_revision = False, None  # one-shot, even when it fails
        try:
            return await self._compare_and_sync(key, obj, spec, memo, requested, revision)
        except errors.APIError:
            # The API server failed us, not the request: keep it for the retry, and forget
            # what this round recorded so the retry compares and writes status again.
            if requested and not memo.sync_requested:
                memo.sync_requested, memo.sync_revision = True, revision
            memo.revision = None
            raise

    async def _compare_and_sync(
        self,
        key: str,
        obj: dict[str, Any],
        spec: RepoSpec,
        memo: Memo,
        requested: bool,
        revision: str | None,
    ) -> float | None:
        fetched = await self._fetch(
            obj, spec, revision or spec.target_revision, memo, requested, revision
        )
        if fetched is None:
            return 0.0 if revision is not None else spec.interval
        commit = fetched
        kinds = set(DEFAULT_KINDS) | memo.kinds | memo.git_kinds
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        engine = self.tenants.engine(key)
        scope = self.tenants.scope(obj, spec)
        legacy = LEGACY_KINDS | kinds if memo.legacy is None else memo.legacy
        probe = await engine.reader.probe(key, uid, kinds, memo.desired, scope=scope, legacy=legacy)
        memo.legacy = probe.legacy
        generation = (obj.get("metadata") or {}).get("generation")
        retry_due = memo.retry_at is not None and self.monotonic() >= memo.retry_at
        claimed = memo.claimed
        failing = any(
            c.get("type") in status.ERROR_CONDITIONS
            for c in (obj.get("status") or {}).get("conditions") or []
        )
        if (
            (memo.revision, memo.generation) == (commit.sha, generation)
            and memo.stamp is not None
            and memo.stamp == engine.reader.stamp(probe, key, uid, memo.watch)
            and not (memo.refresh or requested or retry_due or failing or claimed)
        ):
            return self._requeue(spec, memo)
        forced = memo.refresh or requested
        memo.refresh = False
        state = await engine.reader.complete(probe, key, uid, memo.desired, scope=scope)
        sources_of = keys.recorded_sources(obj)  # bounded: the last comparison has them all
        if memo.comparison is not None:
            sources_of = {**keys.sources_of(memo.comparison.resources), **sources_of}
        comparison = await self._compare(obj, spec, memo, state, sources_of)
        operation = None
        stamp: str | None = state.stamp
        if operations.should_sync(spec, memo, commit.sha, comparison, requested, retry_due):
            memo.stage = status.SYNC_ERROR
            operation = await operations.run(
                engine,
                spec,
                memo,
                commit,
                comparison,
                clock=self.clock,
                monotonic=self.monotonic,
                metrics=self.metrics,
            )
            probe = await engine.reader.probe(
                key, uid, kinds | memo.kinds, memo.desired, scope=scope, legacy=memo.legacy
            )
            state = await engine.reader.complete(
                probe, key, uid, memo.desired, scope=scope, outcomes=_results(operation)
            )
            stamp = state.stamp
            comparison = await self._compare(obj, spec, memo, state, sources_of)
            if (
                operation.phase == "Succeeded"
                and spec.self_heal
                and operations.actionable(comparison)
            ):
                # An edit landed between the apply and the re-read: the watch event it caused
                # must not find this state memoised, or healing waits for the interval.
                stamp = None
        memo.revision, memo.stamp, memo.generation = commit.sha, stamp, generation
        memo.watch = state.watch
        memo.comparison = comparison
        memo.claimed = ownership.claimed(comparison)
        memo.kinds |= state.kinds
        applied = (memo.git_kinds | state.kinds) - DEFAULT_KINDS
        await self._write_status(
            obj,
            lambda old: guards.with_prune_condition(
                status.build(old, comparison, commit.sha, self.clock(), operation, applied),
                comparison,
                self.clock(),
            ),
            # A comparison nobody asked for that changes nothing but `reconciledAt` (an own
            # job's status write, a repository compared every round) writes nothing.
            unless_unchanged=not forced and operation is None,
        )
        if operation is not None:
            report.report(obj, key, operation, self.emit, log)
        return self._requeue(spec, memo)

    async def _round_failed(self, key: str, exc: Exception) -> float:
        memo = self.memo(key)
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"internal error: {message} (retried with back-off)"
        if memo.failure != message:
            log.error("gitops %s: %s", key, message, exc_info=exc)
        else:
            log.debug("gitops %s: %s", key, message)
        first, memo.failure = memo.failure != message, message
        memo.revision = None  # the next round does everything again
        namespace, name = key.split("/", 1)
        try:
            obj = await self.client.get(JOB_REPOSITORIES, name, namespace)
            if first:
                self.emit(obj, "Warning", memo.stage, message)
            await self._write_status(
                obj,
                lambda old: status.with_condition(
                    old, memo.stage, "InternalError", message, self.clock()
                ),
            )
        except errors.APIError as e:
            log.debug("gitops %s: cannot record the error: %s", key, e)
        return self.error_backoff.when(key)

    # --- steps ----------------------------------------------------------------------------------

    async def _fetch(
        self,
        obj: dict[str, Any],
        spec: RepoSpec,
        revision: str | None,
        memo: Memo,
        requested: bool = False,
        requested_revision: str | None = None,
    ) -> Commit | None:
        """The commit to compare with (its manifests checked into `memo`), or None after
        recording a ComparisonError — or, for a requested sync, the operation's Error (the
        request is dropped; a requested revision that cannot be fetched is no
        ComparisonError: the next round compares with targetRevision again)."""
        started = time.monotonic()
        begun = self.clock()
        try:
            self.tenants.admit(obj, spec)
            creds = await self._credentials(obj, spec)
            if requested_revision is not None and spec.automated:
                await self._target_only(spec, requested_revision, creds)
            ref, commit = await self.git.fetch(spec.repo_url, revision, creds)
            if revision is None:
                memo.head_ref = ref.ref
            wanted = (commit.sha, spec.path, spec.recurse, spec.destination)
            if memo.checked_for != wanted:
                loaded, memo.blobs = await reading.load(self.git, spec, commit.sha, memo.blobs)
                memo.checked = await self.tenants.bounded(obj, spec, loaded)
                memo.desired, memo.git_kinds = await asyncio.to_thread(
                    lambda: (
                        keys.desired_keys(memo.checked, spec.destination),
                        keys.kinds_of(memo.checked),
                    )
                )
                memo.checked_for, memo.commit = wanted, commit
        except (GitError, sources.SourcesError) as exc:
            self.metrics.fetch_failures.inc()
            message = exc.message if isinstance(exc, GitError) else str(exc)
            if requested:
                await self._operation_error(obj, requested_revision, message, begun)
            if requested_revision is None:
                await self._comparison_error(obj, message)
            return None
        finally:
            self.metrics.fetch_duration.observe(time.monotonic() - started)
        return commit

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

    async def _credentials(self, obj: dict[str, Any], spec: RepoSpec) -> Credentials | None:
        if not spec.secret_name:
            return None
        namespace = str((obj.get("metadata") or {}).get("namespace", ""))
        secret = await self.tenants.secret(obj, spec)  # as the repository's ServiceAccount
        raw = secret.get("data") or {}
        data: dict[str, str] = {}
        for name in ("username", "password", "token", "sshPrivateKey"):
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
        )

    async def _compare(
        self,
        obj: dict[str, Any],
        spec: RepoSpec,
        memo: Memo,
        state: State,
        sources_of: dict[ResourceKey, str],
    ) -> Comparison:
        """Compare; then keep off objects another repository tracks (gitops/ownership.py) and
        block prune of an empty desired state (gitops/guards.py)."""
        key, uid = repo_id(obj), str((obj.get("metadata") or {}).get("uid") or "")
        live, tracked = state.objects, state.tracked
        comparison = await asyncio.to_thread(  # CPU-heavy on a big repository: off the loop
            lambda: compare(
                memo.checked,
                live,
                tracked,
                repository=key,
                destination=spec.destination,
                ignore_differences=spec.ignore_differences,
                sources=sources_of,
                repository_uid=uid,
                previous=memo.reuse,
            )
        )
        memo.reuse = comparison.reuse
        desired = [r.key for r in comparison.resources if r.key is not None and not r.prune]
        foreign = await ownership.foreign_claims(live, desired, key, uid, self._repository_uid)
        comparison = ownership.mark_foreign(comparison, foreign)
        return guards.guard_empty(comparison, allowed=guards.allow_empty(obj), path=spec.path)

    async def _repository_uid(self, namespace: str, name: str) -> str | None:
        """The uid of the JobRepository `namespace/name`, None when there is none,
        `ownership.UNKNOWN` when the API server refuses to say (its objects are then kept off)."""
        try:
            other = await self.client.get(JOB_REPOSITORIES, name, namespace)
        except errors.NotFound:
            return None
        except errors.APIError:
            return ownership.UNKNOWN
        return str((other.get("metadata") or {}).get("uid") or ownership.UNKNOWN)

    async def _operation_error(
        self, obj: dict[str, Any], revision: str | None, message: str, started: datetime
    ) -> None:
        key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        text = f"revision {revision}: {message}" if revision else message
        log.warning("gitops %s: requested sync failed: %s", key, text)
        self.emit(obj, "Warning", "SyncFailed", f"requested sync failed: {text}")
        self.metrics.syncs.labels("Error").inc()
        await self._write_status(
            obj,
            lambda old: status.with_operation_error(
                old, revision or "", text, started, self.clock()
            ),
        )

    async def _comparison_error(self, obj: dict[str, Any], message: str) -> None:
        key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        log.warning("gitops %s: cannot compare with Git: %s", key, message)
        self.emit(obj, "Warning", status.COMPARISON_ERROR, message)
        await self._write_status(
            obj,
            lambda old: status.with_condition(
                old, status.COMPARISON_ERROR, "GitError", message, self.clock()
            ),
        )

    async def _write_status(
        self,
        obj: dict[str, Any],
        make: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        unless_unchanged: bool = False,
    ) -> None:
        """`gitops.statuswrite.write_status`, recording the requests this round handles."""
        meta = obj["metadata"]
        memo = self.memos.get(f"{meta.get('namespace')}/{meta['name']}")
        await write_status(
            self.client,
            obj,
            make,
            handling=memo.handling if memo else None,
            unless_unchanged=unless_unchanged,
        )

    def _requeue(self, spec: RepoSpec, memo: Memo) -> float:
        if memo.retry_at is None:
            return spec.interval
        return max(0.0, min(spec.interval, memo.retry_at - self.monotonic()))


def _results(operation: status.Operation) -> list[tuple[ResourceKey, dict[str, Any] | None]]:
    """(key, object after) of each apply of `operation`, (key, None) of each prune."""
    out: list[tuple[ResourceKey, dict[str, Any] | None]] = []
    for o in operation.outcomes:
        if o.status == SYNCED and o.live is not None:
            out.append((o.key, o.live))
        elif o.status == PRUNED:
            out.append((o.key, None))
    return out
