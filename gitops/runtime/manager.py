"""The GitOps reconciler's moving parts, wired — and the `gitops.runtime.hub.Hub` the API reads through.

Shaped like the job controller's manager (`controller/manager.py`), on the process's
`kube.Manager` (its caches, leases and supervised loops):

- an informer of JobRepositories (every namespace) and one per training-job kind — the
  Manager's, shared with the job controller in `trainops up` —, indexed by tracking id: every
  round reads its repository's jobs from them (`gitops.runtime.livecache`), never a list. Every
  replica runs them (a standby has warm caches); the Hub reads from them;
- a JobRepository event enqueues its key; a training-job event enqueues the repository named by
  its tracking annotation (so a job deleted or edited by hand is healed at once, not at the
  next poll); each reconcile asks to be requeued after the repository's `interval`;
- only the holder of the Lease `trainops-gitops` (elected by the Manager) runs the workers;
- Events on JobRepositories go through a bounded buffer to their own sender loop;
- `changes()` fans informer events out to subscribers, each with a bounded queue: one that
  falls behind loses its backlog and gets a `resync` Change instead of slowing the others.

Triggers besides the interval: `refresh` (compare now, even if nothing changed), `sync` (sync
now, optionally to a revision), `push` (a push webhook for a repository's URL and branch: a
round now — on the leader it compares only when the revision or a live object changed, so a
push that moved nothing costs an `ls-remote`; a standby passes it on as a refresh request;
nothing in a push payload is ever applied, it only says when to fetch; pushes that prove no
secret trigger a repository at most `UNPROVEN_PUSHES`). Refresh and sync are
writes to the JobRepository (`gitops.engine.triggers`: an annotation, merge-patched as this service),
so any replica takes them; the informer wakes the leader, which records in status what it has
handled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gitops.engine import names, status, triggers
from gitops.engine.diff import mask_secrets, normalize_live
from gitops.engine.limits import Limits
from gitops.engine.redact import redact, redact_value
from gitops.engine.spec import read_spec, repo_id
from gitops.engine.tenancy import Boundaries
from gitops.engine.urls import GitError, normalize_repo_url, validate_revision
from gitops.runtime import fairness
from gitops.runtime.hub import Change, ResourceDiff, UnknownRepository
from gitops.runtime.livecache import TRACKING_INDEX, InformerCache, tracking_ids
from gitops.runtime.memo import Memo
from gitops.runtime.metacache import MetadataCache
from gitops.runtime.metrics import GitOpsMetrics
from gitops.runtime.pushsecrets import PushSecrets
from gitops.runtime.reconciler import JOB_REPOSITORIES, LOGGER, Reconciler
from gitops.source.git import Git
from gitops.source.pushhooks import PushCheck, PushEvent
from kube import errors, resources
from kube.events import EventBuffer, EventRecorder
from kube.informer import wait_synced
from kube.manager import Manager
from kube.ratelimit import KeyedBuckets
from kube.workqueue import WorkQueue, run_workers

__all__ = ["UNPROVEN_PUSHES", "GitOpsReconciler", "GitOpsSettings"]

log = logging.getLogger(LOGGER)

COMPONENT = "trainops-gitops"
SUBSCRIBER_BUFFER = 1000
STATUS_DELAY = 2.0
"""A job's status change refreshes its repository's health this much later, so a burst of
status writes (pods starting) costs one comparison."""
UNPROVEN_PUSHES = (1.0, 5)
"""What pushes that prove no secret (none asked of the repository) may trigger, per repository:
rounds a second on average, and at once. A Git host pushes far less; a flood naming one
repository's URL gets it a round a second, not a round per request (`gitops.api.floods` bounds
the requests themselves)."""
_JOB_RESOURCES = (resources.TFJOBS, resources.XGBJOBS)


@dataclass(frozen=True)
class GitOpsSettings:
    workers: int = 2
    lease_name: str = "trainops-gitops"
    """The Lease only whose holder reconciles (timings and identity: the Manager's
    `kube.LeaderElection`, one per process)."""
    git_timeout: float = 60.0
    """The longest a git call may take (a fetch of a large repository)."""
    ls_remote_timeout: float = 15.0
    """The longest a round's first, cheap step (`git ls-remote`, resolving the revision) may
    take: a remote that does not answer costs this (at most `git_timeout`)."""
    max_rounds_per_namespace: int = fairness.DEFAULT_LIMIT
    """Rounds of one namespace in flight at once (`gitops.runtime.fairness`): one tenant's slow
    remotes cannot hold every worker."""
    namespace: str | None = None
    """Watch JobRepositories of this namespace only (None: every namespace)."""
    reconcile: bool = True
    """False: only watch (the Hub's reads work) and never sync: another install syncs."""
    boundaries: Boundaries = field(default_factory=Boundaries)
    """What each repository may reach and whom it acts as (`gitops.engine.tenancy`); the default is
    a shared cluster's: its own namespace, as its ServiceAccount."""
    limits: Limits = field(default_factory=Limits)
    """What one revision of a repository may hold: files, documents, objects, bytes, depth
    (`gitops.engine.limits`); over one, the revision is refused and the last one stays."""


class GitOpsReconciler:
    """Runs until `stop()`; implements `gitops.runtime.hub.Hub`."""

    def __init__(
        self,
        manager: Manager,
        cache_dir: str | os.PathLike[str],
        settings: GitOpsSettings | None = None,
        *,
        metrics: GitOpsMetrics | None = None,
        git: Git | None = None,
    ) -> None:
        self.manager = manager
        self.client = client = manager.client
        self.settings = settings or GitOpsSettings()
        self.metrics = metrics or GitOpsMetrics()
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        self.git = git or Git(
            cache_dir,
            timeout=self.settings.git_timeout,
            ls_remote_timeout=min(self.settings.ls_remote_timeout, self.settings.git_timeout),
        )
        self.queue = WorkQueue(name="jobrepositories")
        self.gate = fairness.Gate(self.settings.max_rounds_per_namespace)
        """Rounds in flight per namespace, and the keys parked behind them."""
        ns = self.settings.namespace
        self.repos = manager.informer(JOB_REPOSITORIES, namespace=ns)
        # The Manager's job caches (the job controller's own in `trainops up`), indexed by
        # tracking id.
        self.job_informers = {
            r.kind: manager.informer(
                r,
                indexers={TRACKING_INDEX: tracking_ids},
                transform=resources.cached_training_job,  # the controller's too: one cache
            )
            for r in _JOB_RESOURCES
        }
        self.live_cache = InformerCache(self.job_informers.values())
        """Live training jobs by tracking id, for every round (`gitops.runtime.livecache`)."""
        self.metadata = MetadataCache(manager)
        """The other kinds repositories keep, watched metadata-only while one names them
        (`gitops.runtime.metacache`)."""
        self.events = EventBuffer(EventRecorder(client, COMPONENT), logger=log)
        self.reconciler = Reconciler(
            client,
            self.git,
            self._emit,
            self.metrics,
            boundaries=self.settings.boundaries,
            limits=self.settings.limits,
            live_cache=self.live_cache,
            metadata=self.metadata,
            # Authoritative only when it watches every namespace (another namespace's repository
            # would look absent, and its objects free to take).
            cached=self.repos.get if ns is None else None,
        )
        self.push_secrets = PushSecrets(client, self.settings.boundaries)
        """Each repository's own push secret, read as its ServiceAccount."""
        self._unproven = KeyedBuckets(*UNPROVEN_PUSHES)
        """Per repository, what pushes that prove no secret may still trigger."""
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self.repos.add_handler(self._on_repository)
        for informer in self.job_informers.values():
            informer.add_handler(self._on_job)
        self.metrics.repositories_by_status(self._status_counts)
        self.metrics.parked_rounds(lambda: self.gate.parked())
        if self.settings.reconcile:
            manager.add("gitops/workers", self._work, lease=self.settings.lease_name)
        manager.add("gitops/events", self.events.run)
        manager.on_stop(self.queue.shut_down)  # after the loops (see controller.manager)
        if git is None:
            manager.on_stop(self.git.close)  # ours to close; a Git passed in is the caller's

    # -- lifecycle ------------------------------------------------------------------------------
    def _emit(self, obj: dict[str, Any], type: str, reason: str, message: str) -> None:
        """Buffer an Event, its message masked (`gitops.engine.redact`): git errors echo the URL."""
        self.events.emit(obj, type, reason, redact(message))

    async def wait_synced(self, timeout: float | None = None) -> None:
        await wait_synced([self.repos, *self.job_informers.values()], timeout)

    def problems(self) -> dict[str, str]:
        return self.manager.problems()

    @property
    def is_leader(self) -> bool:
        return self.manager.is_leader(self.settings.lease_name)

    # -- the Hub --------------------------------------------------------------------------------
    def repositories(self) -> list[dict[str, Any]]:
        return sorted(self.repos.list(), key=repo_id)

    def repository(self, namespace: str, name: str) -> dict[str, Any]:
        obj = self.repos.get(namespace, name)
        if obj is None:
            raise UnknownRepository(f"{namespace}/{name}")
        return self._with_every_resource(obj)

    def diff(self, namespace: str, name: str) -> list[ResourceDiff]:
        self.repository(namespace, name)
        memo = self.reconciler.memos.get(f"{namespace}/{name}")
        if memo is None or memo.live.comparison is None:
            return []
        out = []
        for r in memo.live.comparison.resources:
            if r.status == "Synced" or r.key is None:
                continue
            text = r.diff_text
            if r.prune and r.live is not None:
                text = _removal(normalize_live(r.live))
            elif r.error:
                text = r.error
            elif not text:
                text = r.message
            k = r.key
            plural = self.reconciler.discovery.known_plural(k.group, k.kind) or ""
            out.append(
                ResourceDiff(k.group, k.kind, k.namespace, k.name, r.file, r.line, text, plural)
            )
        return out

    def jobs(self) -> list[dict[str, Any]]:
        found = [j for informer in self.job_informers.values() for j in informer.list()]
        return sorted(found, key=lambda j: (str(j.get("kind")), resources.key_of(j)))

    async def refresh(self, namespace: str, name: str) -> None:
        self.repository(namespace, name)
        await self._request(namespace, name, triggers.request_patch("refresh", self._now()))

    async def sync(self, namespace: str, name: str, revision: str | None = None) -> None:
        obj = self.repository(namespace, name)
        key = f"{namespace}/{name}"
        memo = self.reconciler.memos.get(key) or Memo()  # another replica's leader: empty
        if revision is not None:
            try:
                validate_revision(revision)
            except GitError as e:
                raise ValueError(e.message) from None
            spec = read_spec(obj)
            if spec.automated and not _is_target(revision, spec.target_revision, obj, memo):
                follows = spec.target_revision or "HEAD"
                unknown = ""
                if spec.target_revision in (None, "HEAD") and memo.source.head_ref is None:
                    # A standby has not fetched it: which branch HEAD is, it cannot tell.
                    unknown = " (this replica does not know HEAD's branch: name no revision)"
                raise ValueError(
                    f"{key} has an automated sync policy: it follows {follows}{unknown}; change "
                    "spec.targetRevision, or turn automated sync off, to sync another revision"
                )
        await self._request(namespace, name, triggers.request_patch("sync", self._now(), revision))

    async def delete(self, namespace: str, name: str) -> None:
        self.repository(namespace, name)
        try:
            await self.client.delete(JOB_REPOSITORIES, name, namespace)
        except errors.NotFound:
            raise UnknownRepository(f"{namespace}/{name}") from None

    async def push(self, event: PushEvent, check: PushCheck) -> list[str]:
        if event.ignored:
            return []
        urls = set(event.repo_urls)
        loop = asyncio.get_running_loop()
        out = []
        for obj in self.repositories():
            spec = read_spec(obj)
            if normalize_repo_url(spec.repo_url) not in urls:
                continue
            # Proved before the branch is matched: a push its secret proves, to a branch the
            # repository does not follow, is no 401.
            own = await self.push_secrets.value(obj, spec)
            if not check.admits(own):
                continue
            key = repo_id(obj)
            if not self._push_matches(spec.target_revision, event, key):
                continue
            if not check.proven(own) and self._unproven.take(key, loop.time()):
                continue  # a flood naming this repository: it has had its rounds
            if self.is_leader:
                # A round now: it fetches, and compares only if the revision or a live
                # object changed (a push that moved nothing costs an ls-remote).
                self.queue.add(key)
            else:
                # The leader is another replica: ask it in the cluster (a refresh request,
                # so it compares in full, as a refresh asked by a user).
                await self.refresh(*key.split("/", 1))
            out.append(key)
        return out

    def changes(self) -> AsyncIterator[Change]:
        # Subscribed now, not at the first `anext`: changes right after the call are kept.
        queue: asyncio.Queue[Change] = asyncio.Queue(SUBSCRIBER_BUFFER)
        self._subscribers.add(queue)
        return self._stream(queue)

    # -- internals ------------------------------------------------------------------------------
    def _now(self) -> datetime:
        return self.reconciler.clock()

    async def _request(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Write a request (`gitops.engine.triggers`) to the JobRepository, as this service: the
        leader — this replica or another, now or after a leader change — carries it out."""
        try:
            await self.client.patch(JOB_REPOSITORIES, name, patch, namespace, patch_type="merge")
        except errors.NotFound:
            raise UnknownRepository(f"{namespace}/{name}") from None

    def _with_every_resource(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` with every resource in `status.resources`, from the last comparison in memory,
        when the stored status lists only some (`gitops.engine.status`: bounded for etcd) and that
        comparison is the one the status shows (same revision)."""
        st = obj.get("status") or {}
        summary = st.get("summary") or {}
        if summary.get("listed") == summary.get("total"):
            return obj
        memo = self.reconciler.memos.get(repo_id(obj))
        if memo is None or memo.live.comparison is None:
            return obj
        if memo.live.revision != (st.get("sync") or {}).get("revision"):
            return obj
        every = redact_value(status.resource_entries(memo.live.comparison))
        return {**obj, "status": {**st, "resources": every}}

    def _push_matches(self, target: str | None, event: PushEvent, key: str) -> bool:
        if target in (None, "HEAD"):
            memo = self.reconciler.memos.get(key)
            head = memo.source.head_ref if memo else None
            # Unknown default branch (not fetched yet): any push to the URL is worth a fetch.
            return head is None or event.branch is None or head == f"refs/heads/{event.branch}"
        assert target is not None
        short = target.removeprefix("refs/heads/").removeprefix("refs/tags/")
        return short in (event.branch, event.tag)

    async def _stream(self, queue: asyncio.Queue[Change]) -> AsyncIterator[Change]:
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.discard(queue)

    def _publish(self, change: Change) -> None:
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(change)
            except asyncio.QueueFull:
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(Change("resync", "", {}))

    async def _work(self) -> None:
        await self.wait_synced()
        log.debug("gitops leading: reconciling with %d workers", self.settings.workers)
        # A new term starts with no round in flight and every key queued: parked keys of an
        # earlier term are among them.
        self.gate = fairness.Gate(self.settings.max_rounds_per_namespace)
        for obj in self.repos.list():
            self.queue.add(repo_id(obj))
        handler = fairness.gated(self.queue, self.gate, self._reconcile)
        await run_workers(self.queue, handler, self.settings.workers, logger=log)

    async def _reconcile(self, key: object) -> float | None:
        started = time.perf_counter()
        try:
            requeue = await self.reconciler.reconcile(str(key))
        except Exception:
            self.metrics.rounds.labels("error").inc()
            raise
        finally:
            self.metrics.round_duration.observe(time.perf_counter() - started)
        self.metrics.rounds.labels("success").inc()
        if requeue is not None:
            # add_after, not the handler's return: the rate limiter must not stretch the wait.
            self.queue.add_after(str(key), requeue)
        return None

    def _on_repository(self, event_type: str, obj: dict[str, Any], old: Any) -> None:
        key = repo_id(obj)
        if event_type == "DELETED":
            self.reconciler.memos.pop(key, None)
        elif (
            old is None
            or (old.get("metadata") or {}).get("generation")
            != (obj.get("metadata") or {}).get("generation")
            or triggers.changed(old, obj)
        ):
            # New, its spec changed, or a sync/refresh was requested (status writes and other
            # metadata do not wake it).
            self.queue.add(key)
        self._publish(Change("repository", event_type, obj))

    def _on_job(self, event_type: str, obj: dict[str, Any], old: Any) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        owner = annotations.get(names.REPOSITORY_ANNOTATION)
        if owner and "/" in str(owner):
            if event_type == "DELETED" or _spec_changed(obj, old):
                self.queue.add(str(owner))  # possible drift: heal now
            else:
                self.queue.add_after(str(owner), STATUS_DELAY)  # health: batch status bursts
        self._publish(Change("job", event_type, obj))

    def _status_counts(self) -> dict[tuple[str, str], int]:
        counts: Counter[tuple[str, str]] = Counter()
        for obj in self.repos.list():
            st = obj.get("status") or {}
            sync = str((st.get("sync") or {}).get("status") or "")
            health = str((st.get("health") or {}).get("status") or "")
            counts[(sync, health)] += 1
        return dict(counts)


def _is_target(revision: str, target: str | None, obj: dict[str, Any], memo: Memo) -> bool:
    """Whether `revision` names what `target` resolves to now (as the last round saw it)."""
    short = revision.removeprefix("refs/heads/").removeprefix("refs/tags/")
    names_ = {target, (target or "").removeprefix("refs/heads/").removeprefix("refs/tags/")}
    if target in (None, "HEAD"):
        names_ |= {"HEAD", (memo.source.head_ref or "").removeprefix("refs/heads/")}
    if revision in names_ or short in names_:
        return True
    recorded = ((obj.get("status") or {}).get("sync") or {}).get("revision")
    current = memo.live.revision or str(recorded or "")
    return len(revision) >= 4 and bool(current) and current.lower().startswith(revision.lower())


def _spec_changed(obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """A job event that may be drift: new, or anything but its status changed."""
    if old is None:
        return True
    strip = {"status", "metadata"}
    a = {k: v for k, v in obj.items() if k not in strip}
    b = {k: v for k, v in old.items() if k not in strip}
    meta = ("labels", "annotations")
    return a != b or any(
        (obj.get("metadata") or {}).get(m) != (old.get("metadata") or {}).get(m) for m in meta
    )


def _removal(live: dict[str, Any]) -> str:
    import yaml

    masked, _ = mask_secrets(live, None)
    text = yaml.safe_dump(masked, sort_keys=True, default_flow_style=False)
    return "".join(f"-{line}\n" for line in text.splitlines())
