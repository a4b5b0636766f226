"""One reconcile of one JobRepository: fetch, read, pre-flight, compare, sync, write status.

Level-triggered like the job controller (`controller/reconciler.py`): the key is
`namespace/name`, the JobRepository is read fresh, and the answer is when to look again (the
polling `interval`, or sooner for a retry). Per repository, a `Memo` in memory keeps what the
last round saw, so a round where neither the revision, the spec nor any of its own live
objects changed (`gitops.runtime.livestate`'s stamp) does no work at all — only `git ls-remote`, O(1)
reads of the shared cache, and a list by the uid label per kind it keeps outside the cache;
a commit is read and pre-checked once, and only its blobs not read before
(`gitops.source.incremental`); `compare` diffs only what changed since the last comparison.

When to sync (docs/GITOPS.md, "Sync semantics"): always when asked (`request_sync`); with an
automated policy, once per new revision (history gets an entry), and — with `selfHeal` — again
whenever a live object drifts or disappears; after a failed apply, again after the retry
back-off while `syncPolicy.retry.limit` allows. Pre-flight denials are not retried (the same
commit gives the same answer) but are recorded on their resource with file:line.

A repository that cannot be fetched, whose `path` is missing, or whose revision is over one of
its limits (`gitops.engine.limits`: files, documents, objects, bytes, depth; refused before
the work it bounds), keeps its last synced state: only the ComparisonError condition changes
(cleared by the next good fetch); nothing is applied or pruned. A refused revision is not read
again until it or the spec changes. A requested sync
is one-shot (a revision that cannot be fetched is an operation in phase Error); after a
restart the recorded status says what was synced last. Any other exception of a round is a
ComparisonError/SyncError condition, logged once, retried with back-off.

Tenancy (`gitops.runtime.acting`, rules in `gitops.engine.tenancy`): before any request of its round the
repository's identity is settled and its URL checked; live reads, applies, prunes and the
`secretRef` read go through the engine of that identity; refused manifests are entry errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gitops.engine import finished, guards, keys, ownership, report, status, tenancy, triggers
from gitops.engine import limits as repo_limits
from gitops.engine.compare import Comparison, compare, settled
from gitops.engine.crd import JOB_REPOSITORIES
from gitops.engine.pairing import ResourceKey
from gitops.engine.records import PRUNED, SYNCED, Commit
from gitops.engine.spec import RepoSpec, read_spec, repo_id
from gitops.engine.urls import GitError
from gitops.runtime import livestate, operations
from gitops.runtime.acting import Tenants
from gitops.runtime.discovery import Discovery
from gitops.runtime.fetching import Fetcher, RepeatedRefusal
from gitops.runtime.livecache import LiveCache
from gitops.runtime.livestate import State
from gitops.runtime.memo import Memo
from gitops.runtime.metacache import MetadataCache
from gitops.runtime.metrics import GitOpsMetrics
from gitops.runtime.statuswrite import write_status
from gitops.runtime.sync import SyncEngine
from gitops.source import checkout
from gitops.source.git import Git
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
lists these (and the repository's own kinds) by the managed label (`gitops.runtime.livestate`)."""

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
        metadata: MetadataCache | None = None,
        cached: Callable[[str, str], dict[str, Any] | None] | None = None,
        limits: repo_limits.Limits = repo_limits.DEFAULT,
    ) -> None:
        self.client = client
        self.git = git
        self.emit = emit
        self.metrics = metrics
        self.discovery = Discovery(client)
        self.engine = SyncEngine(client, self.discovery, cache=live_cache, metadata=metadata)
        """The reconciler's own identity (repositories acting as it, and discovery)."""
        self.tenants = Tenants(
            client, self.discovery, self.engine, boundaries or tenancy.Boundaries(), metadata
        )
        self.clock = clock or (lambda: datetime.now(UTC))
        self.monotonic = monotonic
        self.limits = limits
        self.fetcher = Fetcher(git, self.tenants, limits)
        """The fetch and read stage (`gitops.runtime.fetching`)."""
        """What one revision of a repository may hold (`gitops.engine.limits`)."""
        self.memos: dict[str, Memo] = {}
        self.cached = cached
        """The JobRepository by (namespace, name) from the Manager's informer, when there is one
        (`GitOpsReconciler`): a round reads it there instead of asking the API server."""
        self._overwritten: dict[str, str] = {}
        """Per repository, the resourceVersion our last status write replaced: a cached object
        still at it predates our own write, and the round reads the server instead."""
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
                self.memos[key].requests.handling = None
        self.error_backoff.forget(key)
        if key in self.memos:
            self.memos[key].failure.message = None
        return requeue

    async def _round(self, key: str) -> float | None:
        namespace, name = key.split("/", 1)
        obj = await self._repository(key, namespace, name)
        if obj is None:
            self.memos.pop(key, None)
            self._overwritten.pop(key, None)
            if self.engine.metadata is not None:
                await self.engine.metadata.forget(key)  # its kinds: watched no more for it
            return None
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        spec = read_spec(obj)
        memo = self.memo(key)
        memo.failure.stage = status.COMPARISON_ERROR
        if memo.retry.synced_revision is None:  # a restart: what the status says was synced last
            memo.retry.synced_revision = status.last_synced_revision(obj.get("status") or {})
        if not memo.live.kinds:  # a restart: the kinds it applied (a Role gone from Git is pruned)
            memo.live.kinds = status.applied_kinds(obj.get("status") or {})
        # Requests written to the object (any replica's API, kubectl): `gitops.engine.triggers`.
        # Whatever this round writes to status records them as handled (`_write_status`).
        asked = triggers.pending(obj)
        memo.requests.handling = asked if asked.any else None
        if asked.refresh:
            memo.requests.refresh = True
        if asked.sync:
            memo.requests.sync_requested, memo.requests.sync_revision = True, asked.revision
        requested, revision = memo.requests.sync_requested, memo.requests.sync_revision
        memo.requests.sync_requested, memo.requests.sync_revision = (
            False,
            None,
        )  # one-shot, even when it fails
        try:
            return await self._compare_and_sync(key, obj, spec, memo, requested, revision)
        except errors.APIError:
            # The API server failed us, not the request: keep it for the retry, and forget
            # what this round recorded so the retry compares and writes status again.
            if requested and not memo.requests.sync_requested:
                memo.requests.sync_requested, memo.requests.sync_revision = True, revision
            memo.live.revision = None
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
        kinds = set(DEFAULT_KINDS) | memo.live.kinds | memo.source.git_kinds
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        engine = self.tenants.engine(key)
        scope = self.tenants.scope(obj, spec)
        legacy = LEGACY_KINDS | kinds if memo.live.legacy is None else memo.live.legacy
        probe = await engine.reader.probe(
            key, uid, kinds, memo.source.desired, scope=scope, legacy=legacy,
            previous=memo.live.fetched,
        )  # fmt: skip
        memo.live.legacy, memo.live.fetched = probe.legacy, probe.objects
        generation = (obj.get("metadata") or {}).get("generation")
        retry_due = memo.retry.retry_at is not None and self.monotonic() >= memo.retry.retry_at
        claimed = memo.live.claimed
        failing = any(
            c.get("type") in status.ERROR_CONDITIONS
            for c in (obj.get("status") or {}).get("conditions") or []
        )
        if (
            (memo.live.revision, memo.live.generation) == (commit.sha, generation)
            and memo.live.stamp is not None
            and memo.live.stamp == engine.reader.stamp(probe, key, uid, memo.live.watch)
            and not (memo.requests.refresh or requested or retry_due or failing or claimed)
        ):
            return self._requeue(spec, memo)
        forced = memo.requests.refresh or requested
        memo.requests.refresh = False
        state = await engine.reader.complete(probe, key, uid, memo.source.desired, scope=scope)
        sources_of = keys.recorded_sources(obj)  # bounded: the last comparison has them all
        if memo.live.comparison is not None:
            sources_of = {**keys.sources_of(memo.live.comparison.resources), **sources_of}
        comparison = await self._compare(obj, spec, memo, state, sources_of)
        operation = None
        stamp: str | None = state.stamp
        synced = memo.retry.synced_revision
        if operations.should_sync(spec, synced, commit.sha, comparison, requested, retry_due):
            memo.failure.stage = status.SYNC_ERROR
            operation = await operations.run(
                engine,
                spec,
                memo.retry,
                memo.live.kinds,
                commit,
                comparison,
                clock=self.clock,
                monotonic=self.monotonic,
                metrics=self.metrics,
            )
            # The state after it is derived from the API server's answers to the applies
            # and prunes: nothing is read or compared again.
            results = dict(_results(operation))
            state, probe = livestate.settled(state, probe, results, key, uid, engine.reader.cache)
            memo.live.fetched = probe.objects
            comparison = settled(comparison, results, ignore_differences=spec.ignore_differences)
            memo.live.reuse = comparison.reuse
            stamp = state.stamp
            if (
                operation.phase == "Succeeded"
                and spec.self_heal
                and operations.actionable(comparison)
            ):
                # The server answered with something else than Git says (a webhook, another
                # writer): the next round compares again instead of finding this memoised.
                stamp = None
        memo.live.revision, memo.live.stamp, memo.live.generation = commit.sha, stamp, generation
        memo.live.watch = state.watch
        memo.live.comparison = comparison
        memo.live.claimed = ownership.claimed(comparison)
        applied = (memo.source.git_kinds | state.kinds) - DEFAULT_KINDS
        # What the status records: a kind neither in Git nor found any more (its objects
        # pruned) is looked at no more, and its metadata cache is let go.
        memo.live.kinds = set(applied)
        await self._write_status(
            obj,
            lambda old: finished.with_records(
                guards.with_prune_condition(
                    status.build(old, comparison, commit.sha, self.clock(), operation, applied),
                    comparison,
                    self.clock(),
                ),
                memo.live.finished or {},
                comparison,
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
        if memo.failure.message != message:
            log.error("gitops %s: %s", key, message, exc_info=exc)
        else:
            log.debug("gitops %s: %s", key, message)
        first, memo.failure.message = memo.failure.message != message, message
        memo.live.revision = None  # the next round does everything again
        namespace, name = key.split("/", 1)
        try:
            obj = await self.client.get(JOB_REPOSITORIES, name, namespace)
            if first:
                self.emit(obj, "Warning", memo.failure.stage, message)
            await self._write_status(
                obj,
                lambda old: status.with_condition(
                    old, memo.failure.stage, "InternalError", message, self.clock()
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
            commit, again_compare = await self.fetcher.fetch(
                obj, spec, revision, memo.source, requested_revision
            )
            if again_compare:
                memo.live.revision = None  # same commit, other verdicts: compare again
        except (GitError, checkout.SourcesError, repo_limits.LimitExceeded) as exc:
            again = isinstance(exc, RepeatedRefusal)
            self.metrics.fetch_failures.inc()
            message = exc.message if isinstance(exc, GitError) else str(exc)
            if requested:
                await self._operation_error(obj, requested_revision, message, begun)
            if requested_revision is None:
                reason = (
                    "LimitExceeded" if isinstance(exc, repo_limits.LimitExceeded) else "GitError"
                )
                await self._comparison_error(obj, message, reason, again=again)
            return None
        finally:
            self.metrics.fetch_duration.observe(time.monotonic() - started)
        return commit

    async def _compare(
        self,
        obj: dict[str, Any],
        spec: RepoSpec,
        memo: Memo,
        state: State,
        sources_of: dict[ResourceKey, str],
    ) -> Comparison:
        """Compare; then keep off objects another repository tracks (gitops/engine/ownership.py) and
        block prune of an empty desired state (gitops/engine/guards.py)."""
        key, uid = repo_id(obj), str((obj.get("metadata") or {}).get("uid") or "")
        live, tracked = state.objects, state.tracked
        comparison = await asyncio.to_thread(  # CPU-heavy on a big repository: off the loop
            lambda: compare(
                memo.source.checked,
                live,
                tracked,
                repository=key,
                destination=spec.destination,
                ignore_differences=spec.ignore_differences,
                sources=sources_of,
                repository_uid=uid,
                previous=memo.live.reuse,
                cluster_scoped=memo.source.cluster_scoped,
            )
        )
        memo.live.reuse = comparison.reuse
        desired = [r.key for r in comparison.resources if r.key is not None and not r.prune]
        foreign = await ownership.foreign_claims(live, desired, key, uid, self._repository_uid)
        comparison = ownership.mark_foreign(comparison, foreign)
        comparison = ownership.refuse_untracked(comparison, allow=ownership.adopt_existing(obj))
        known = memo.live.finished
        if known is None:  # a restart, or a new leader: what the status remembers
            known = finished.from_status(obj.get("status"))
        rerun = finished.rerun_finished(obj)
        # A digest per finished job of the repository (thousands of them): off the loop.
        comparison, memo.live.finished = await asyncio.to_thread(
            finished.settle, comparison, known, rerun=rerun
        )
        return guards.guard_empty(comparison, allowed=guards.allow_empty(obj), path=spec.path)

    async def _repository_uid(self, namespace: str, name: str) -> str | None:
        """The uid of the JobRepository `namespace/name`, None when there is none,
        `ownership.UNKNOWN` when the API server refuses to say (its objects are then kept off).
        From the informer cache when there is one."""
        if self.cached is not None:
            cached = self.cached(namespace, name)
            if cached is None:
                return None
            return str((cached.get("metadata") or {}).get("uid") or ownership.UNKNOWN)
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

    async def _comparison_error(
        self, obj: dict[str, Any], message: str, reason: str = "GitError", *, again: bool = False
    ) -> None:
        """Record a ComparisonError (logged and an Event, unless `again`: a revision refused
        by the last round already, polled every interval; then status is written only when
        it changes, e.g. to record a request as handled)."""
        key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        if again:
            log.debug("gitops %s: cannot compare with Git: %s", key, message)
        else:
            log.warning("gitops %s: cannot compare with Git: %s", key, message)
            self.emit(obj, "Warning", status.COMPARISON_ERROR, message)
        await self._write_status(
            obj,
            lambda old: status.with_condition(
                old, status.COMPARISON_ERROR, reason, message, self.clock()
            ),
            unless_unchanged=again,  # the same condition again: no write
        )

    async def _repository(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The JobRepository, from the informer cache unless the cache has not yet seen this
        reconciler's own last status write (then from the API server); None when it is gone."""
        if self.cached is not None:
            obj = self.cached(namespace, name)
            rv = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
            if obj is None or rv != self._overwritten.get(key):
                return obj
        try:
            return await self.client.get(JOB_REPOSITORIES, name, namespace)
        except errors.NotFound:
            return None

    async def _write_status(
        self,
        obj: dict[str, Any],
        make: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        unless_unchanged: bool = False,
    ) -> None:
        """`gitops.runtime.statuswrite.write_status`, recording the requests this round handles."""
        meta = obj["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        memo = self.memos.get(key)
        overwritten = await write_status(
            self.client,
            obj,
            make,
            handling=memo.requests.handling if memo else None,
            unless_unchanged=unless_unchanged,
        )
        if overwritten is not None:
            self._overwritten[key] = overwritten

    def _requeue(self, spec: RepoSpec, memo: Memo) -> float:
        if memo.retry.retry_at is None:
            return spec.interval
        return max(0.0, min(spec.interval, memo.retry.retry_at - self.monotonic()))


def _results(operation: status.Operation) -> list[tuple[ResourceKey, dict[str, Any] | None]]:
    """(key, object after) of each apply of `operation`, (key, None) of each prune."""
    out: list[tuple[ResourceKey, dict[str, Any] | None]] = []
    for o in operation.outcomes:
        if o.status == SYNCED and o.live is not None:
            out.append((o.key, o.live))
        elif o.status == PRUNED:
            out.append((o.key, None))
    return out
