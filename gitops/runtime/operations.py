"""One sync operation of one JobRepository, for `gitops.runtime.reconciler`: whether to sync now
(`should_sync`, pure), then the applies in waves (`order.apply_waves`, `APPLY_PARALLELISM` at
once) and prunes (or their PruneSkipped outcomes) through the repository's engine, the retry
back-off recorded in its `memo.Retry`, and the `status.Operation` that status, Events and logs report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from gitops.engine import order, report, status
from gitops.engine.compare import Comparison, ResourceState
from gitops.engine.pairing import ResourceKey
from gitops.engine.records import FAILED, PRUNE_SKIPPED, REPLACING, SYNCED, Commit, Outcome
from gitops.engine.spec import RepoSpec, backoff_seconds
from gitops.runtime.memo import Retry
from gitops.runtime.metrics import GitOpsMetrics
from gitops.runtime.sync import SyncEngine

__all__ = ["APPLY_PARALLELISM", "NO_KEY", "actionable", "run", "should_sync"]


def should_sync(
    spec: RepoSpec,
    synced_revision: str | None,
    sha: str,
    comparison: Comparison,
    requested: bool,
    retry_due: bool,
) -> bool:
    """Whether this round syncs: when asked; with an automated policy, for a new revision or
    a retry that is due, and with selfHeal for drift or something to prune."""
    if requested:
        return True
    if not spec.automated:
        return False
    if sha != synced_revision or retry_due:
        return True
    drifted = actionable(comparison)
    prunable = (
        spec.prune
        and comparison.prune_blocked is None
        and any(r.prune for r in comparison.resources)
    )
    return spec.self_heal and (drifted or prunable)


async def run(
    engine: SyncEngine,
    spec: RepoSpec,
    retry: Retry,
    applied_kinds: set[tuple[str, str]],
    commit: Commit,
    comparison: Comparison,
    *,
    clock: Callable[[], datetime],
    monotonic: Callable[[], float],
    metrics: GitOpsMetrics,
) -> status.Operation:
    """Sync `comparison` through `engine` (the repository's identity): denied documents are
    failed outcomes, the rest applied and pruned in order; `applied_kinds` gets the kinds
    applied, `retry` the synced revision and the retry state."""
    started, t0 = clock(), time.monotonic()
    denied = [
        Outcome(r.key or NO_KEY, FAILED, f"{r.where}: {r.error}")
        for r in comparison.resources
        if r.error is not None
    ]
    outcomes: list[Outcome] = list(denied)
    todo = [r for r in comparison.resources if r.desired is not None and r.status != "Synced"]
    slots = asyncio.Semaphore(APPLY_PARALLELISM)

    async def apply(r: ResourceState) -> Outcome:
        async with slots:
            outcome = await engine.apply(r)
        if outcome.failed and r.where:
            outcome = Outcome(outcome.key, FAILED, f"{r.where}: {outcome.message}")
        elif outcome.status == SYNCED and outcome.key in retry.replacing:
            retry.replacing.discard(outcome.key)
            outcome = Outcome(outcome.key, SYNCED, REPLACED, outcome.live)
        applied_kinds.add((str(r.desired.get("apiVersion")), _key(r).kind))  # type: ignore[union-attr]
        return outcome

    async def prune(r: ResourceState) -> Outcome:
        async with slots:
            return await engine.prune(r)

    for wave in order.apply_waves(todo, _key):  # a wave at once, in order, 8 at a time
        outcomes.extend(await _each(apply, wave))
    prune_states = [r for r in comparison.resources if r.prune] if spec.prune else []
    if comparison.prune_blocked:
        for r in order.prune_order(prune_states, _key):
            outcomes.append(Outcome(_key(r), PRUNE_SKIPPED, comparison.prune_blocked))
    else:
        for wave in order.prune_waves(prune_states, _key):
            outcomes.extend(await _each(prune, wave))
    failed = [o for o in outcomes if o.failed]
    refused = {id(o) for o in denied}
    applied_failed = [o for o in failed if id(o) not in refused]
    new_revision = commit.sha != retry.synced_revision
    if new_revision:
        retry.attempts = 0
    retry.synced_revision = commit.sha
    replacing = {o.key for o in outcomes if o.status == REPLACING}
    retry.replacing = (retry.replacing & {_key(r) for r in todo}) | replacing
    if applied_failed and retry.attempts < spec.retry.limit:
        retry.retry_at = monotonic() + backoff_seconds(spec.retry, retry.attempts)
        retry.attempts += 1
    elif replacing:  # the next round creates them once gone: no back-off, no attempt counted
        retry.retry_at = monotonic() + REPLACE_RECHECK
    else:
        retry.retry_at = None
        if not applied_failed:
            retry.attempts = 0
    metrics.sync_duration.observe(time.monotonic() - t0)
    phase = "Failed" if failed else "Succeeded"
    metrics.syncs.labels(phase).inc()
    return status.Operation(
        revision=commit.sha,
        commit=commit,
        started=started,
        finished=clock(),
        outcomes=tuple(outcomes),
        phase=phase,
        message=report.summary(outcomes, denied),
        new_revision=new_revision,
    )


REPLACE_RECHECK = 1.0
"""Seconds until the round after a Replace's deletion, which creates the object once gone."""
REPLACED = "replaced (deleted and recreated)"

APPLY_PARALLELISM = 8
"""Applies (and prunes) in flight at once within a wave of `order.apply_waves`."""

NO_KEY = ResourceKey("", "", "", "")
"""The key of an outcome for a document without one (it could not be read)."""


async def _each(
    act: Callable[[ResourceState], Coroutine[Any, Any, Outcome]], wave: list[ResourceState]
) -> list[Outcome]:
    """`act` on every resource of `wave` at once (its own semaphore bounds it); the outcomes
    in the wave's order. The first exception cancels the rest of the wave and is raised as it
    is (not in an ExceptionGroup: an APIError is retried by the work queue)."""
    tasks = [asyncio.ensure_future(act(r)) for r in wave]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _key(r: ResourceState) -> ResourceKey:
    assert r.key is not None
    return r.key


def actionable(comparison: Comparison) -> bool:
    """Whether a sync would change something: a resource in Git differs from the cluster."""
    return any(r.desired is not None and r.status != "Synced" for r in comparison.resources)
