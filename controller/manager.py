"""The controller's moving parts, wired onto the process's `kube.Manager`: caches, work queue,
workers, leader election, resync.

What runs where (all loops supervised by the Manager, so a loop that crashes is logged with
its traceback, restarted with back-off and shown by `/readyz`):

- one informer per job kind (the reconciler reads jobs from it: `JobReads`), and one each for
  the jobs' pods, services and TensorBoard Deployments (selected by the job-name label, indexed
  by their controlling owner's uid). The Manager's caches: in `trainops up` GitOps reads the
  very same job informers. Every replica; standbys keep warm caches, so a new leader starts at
  once;
- a job event enqueues the job's key (not the echo of this process's own status write:
  `JobReads.is_known`); a child's event enqueues its owner's key — at once and in the queue's
  urgent lane (handed out before the others) when it may decide the job (a pod finished or
  failed, a child deleted), after `CHILD_BATCH_SECONDS` when it is progress (a pod created,
  Pending or Running), so the events of one moment share one reconcile and one status write;
- one informer on ResourceQuotas (every namespace): any change to a namespace's quota (raised,
  removed, or its `used` recomputed after pods went away) may let a refused create through,
  so it enqueues that namespace's jobs whose ReplicaFailure says FailedCreate at once, instead
  of at their next back-off retry (controller/refusals.py);
- only the holder of the Lease `settings.lease_name` (`coordination.k8s.io/v1`, elected by the
  Manager) runs the workers, which reconcile one key at a time each (`kube.run_workers`); a
  lost lease stops them;
- every `resync_seconds` each known job is enqueued again: level-triggered, so a missed event or
  a timer lost in a restart costs at most one period;
- Events on the jobs are sent from a bounded buffer by their own loop, off the reconcile path.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from controller import labels, refusals
from controller.actions import Event
from controller.lostnodes import DEFAULT_GRACE, node_name
from controller.metrics import ControllerMetrics
from controller.progress_server import ProgressService, ProgressSettings
from controller.reconciler import (
    CHILD_BATCH_SECONDS,
    JOB_RESOURCES,
    OWNER_INDEX,
    Children,
    JobReads,
    Reconciler,
    job_key,
    owner_uid,
    without_spec,
)
from kube import resources
from kube.events import EventBuffer, EventRecorder
from kube.informer import DELETED, Informer, strip_managed_fields, wait_synced
from kube.manager import Manager
from kube.workqueue import WorkQueue, run_workers

__all__ = ["Controller", "ControllerSettings"]

log = logging.getLogger(__name__)

COMPONENT = "trainops-controller"
NAMESPACE_INDEX = "namespace"
NODE_INDEX = "node"
"""The pod informer's index of pods by `spec.nodeName`: a Node's Ready change requeues their jobs."""


@dataclass(frozen=True)
class ControllerSettings:
    workers: int = 4
    resync_seconds: float = 300.0
    lease_name: str = "trainops-controller"
    """The Lease only whose holder reconciles (timings and identity: the Manager's
    `kube.LeaderElection`, one per process)."""
    lost_node_grace: float = DEFAULT_GRACE
    """Seconds a node may be not Ready before the replicas on it count as lost
    (controller/lostnodes.py, `--lost-node-grace`)."""
    progress: ProgressSettings | None = None
    """The progress endpoint (docs/PROGRESS.md); None: none, and pods get no progress env.
    Its `start()` must run before the Manager's: every pod is created with the env."""


class Controller:
    """The job controller's caches, handlers and loops, added to `manager` (which starts and
    stops them); `problems()` is what readiness reports."""

    def __init__(
        self,
        manager: Manager,
        settings: ControllerSettings | None = None,
        *,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.manager = manager
        self.client = client = manager.client
        self.settings = settings or ControllerSettings()
        self.metrics = metrics or ControllerMetrics()
        self.queue = WorkQueue(name="jobs", metrics=self.metrics)
        # The job caches are shared (GitOps reads them too in `trainops up`), so both ask for
        # the same transform: managedFields kept only where the deadline's settle time reads
        # them (controller/lifecycle.py).
        self.jobs = {
            kind: manager.informer(
                resource,
                indexers={NAMESPACE_INDEX: _namespace},
                transform=resources.cached_training_job,
            )
            for kind, resource in JOB_RESOURCES.items()
        }
        selector = labels.JOB_NAME
        indexers = {OWNER_INDEX: owner_uid}

        def child(resource: resources.Resource) -> Informer:
            # Children's managedFields are never read (a job's are: the deadline's settle time),
            # nor the spec of a pod or Service (the plan reads their metadata and status; a
            # TensorBoard Deployment's spec is compared, so it is kept).
            transform = strip_managed_fields if resource is resources.DEPLOYMENTS else without_spec
            return manager.informer(
                resource, label_selector=selector, indexers=indexers, transform=transform
            )

        nodes = manager.informer(resources.NODES, transform=_node_ready)
        self.children = Children(
            pods=child(resources.PODS),
            services=child(resources.SERVICES),
            deployments=child(resources.DEPLOYMENTS),
            # Of a Node the plan reads only the Ready condition.
            nodes=nodes,
        )
        self.children.pods.add_indexer(NODE_INDEX, _pod_node)
        # Why a refused create may pass now: its namespace's quota changed.
        self.quotas = manager.informer(resources.RESOURCEQUOTAS, transform=strip_managed_fields)
        self.events = EventBuffer(EventRecorder(client, COMPONENT), logger=log)
        self.reads = JobReads(client, self.jobs)
        self.progress = (
            ProgressService(
                client,
                self.jobs,
                self.settings.progress,
                enqueue=self.queue.add_after,
                is_leader=lambda: self.is_leader,
            )
            if self.settings.progress is not None
            else None
        )
        self.reconciler = Reconciler(
            client,
            self.children,
            self._emit,
            self.metrics,
            jobs=self.reads,
            pod_hook=self.progress.pod_env if self.progress else None,
            status_hook=self.progress.with_progress if self.progress else None,
            lost_node_grace=self.settings.lost_node_grace,
        )
        for kind, informer in self.jobs.items():
            informer.add_handler(self._on_job(kind))
        self.children.pods.add_handler(self._on_child("Pod"))
        self.children.services.add_handler(self._on_child("Service"))
        self.children.deployments.add_handler(self._on_child("Deployment"))
        self.quotas.add_handler(self._on_quota)
        nodes.add_handler(self._on_node)
        self.metrics.jobs_by_phase(self._phase_counts)
        self.metrics.queue_length(lambda: len(self.queue))
        manager.add("controller/workers", self._work, lease=self.settings.lease_name)
        manager.add("controller/resync", self._resync)
        manager.add("controller/events", self.events.run)
        if self.progress is not None:
            lease = self.settings.lease_name
            manager.add("controller/progress-history", self.progress.run_history, lease=lease)
        # After the loops: shutting the queue down first would end the leader's work normally,
        # which the supervisor would report (and restart) as a loop that returned.
        manager.on_stop(self.queue.shut_down)

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until the controller's own caches have listed once."""
        await wait_synced([*self.jobs.values(), *self._other_informers()], timeout)

    def problems(self) -> dict[str, str]:
        """Why the process is not ready ({} when it is): crashed loops, unsynced caches."""
        return self.manager.problems()

    @property
    def is_leader(self) -> bool:
        return self.manager.is_leader(self.settings.lease_name)

    # -- internals ------------------------------------------------------------------------------
    def _other_informers(self) -> list[Informer]:
        nodes = [self.children.nodes] if self.children.nodes is not None else []
        return [
            self.children.pods,
            self.children.services,
            self.children.deployments,
            self.quotas,
            *nodes,
        ]

    async def _work(self) -> None:
        await self.wait_synced()
        self.reads.reset()
        log.info("controller leading: reconciling with %d workers", self.settings.workers)
        for kind, informer in self.jobs.items():
            for job in informer.list():
                self.queue.add(_key_of(kind, job))
        await run_workers(self.queue, self._reconcile, self.settings.workers, logger=log)

    async def _reconcile(self, key: Hashable) -> float | None:
        return await self.reconciler.reconcile(str(key))

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            for kind, informer in self.jobs.items():
                for job in informer.list():
                    self.queue.add(_key_of(kind, job))

    def _emit(self, job: dict[str, Any], event: Event) -> None:
        self.events.emit(job, event.type, event.reason, event.message)

    def _on_job(self, kind: str) -> Any:
        def handler(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            key = _key_of(kind, obj)
            if event_type == DELETED:
                self.reads.drop(key)
            elif self.reads.is_known(key, obj):
                return  # our own status write coming back: nothing to do for it
            self.queue.add(key)

        return handler

    def _on_child(self, kind: str) -> Any:
        def handler(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            meta = obj.get("metadata") or {}
            delay = child_event_delay(kind, event_type, obj)
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") in JOB_RESOURCES:
                    key = job_key(ref["kind"], meta.get("namespace", ""), ref["name"])
                    if delay > 0:
                        self.queue.add_after(key, delay)
                    else:  # a decision: ahead of the progress and first sights queued before it
                        self.queue.add(key, urgent=True)

        return handler

    def _on_node(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A Node's Ready condition changed: its pods' jobs decide again (a lost node's replicas;
        the plan's timer covers the grace)."""
        if event_type != DELETED:
            if old is None and _ready(obj)[0] == "True":
                return  # a Ready node listed (start, relist): nothing to decide
            if old is not None and _ready(old) == _ready(obj):
                return  # a heartbeat
        name = str((obj.get("metadata") or {}).get("name") or "")
        for pod in self.children.pods.by_index(NODE_INDEX, name):
            meta = pod.get("metadata") or {}
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") in JOB_RESOURCES:
                    self.queue.add(job_key(ref["kind"], meta.get("namespace", ""), ref["name"]))

    def _on_quota(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        for kind, informer in self.jobs.items():
            for job in informer.by_index(NAMESPACE_INDEX, namespace):
                if refusals.refused_before((job.get("status") or {}).get("conditions") or []):
                    self.queue.add(_key_of(kind, job))

    def _phase_counts(self) -> dict[tuple[str, str], int]:
        counts: Counter[tuple[str, str]] = Counter()
        for kind, informer in self.jobs.items():
            for job in informer.list():
                counts[(kind, str((job.get("status") or {}).get("phase") or ""))] += 1
        return dict(counts)


def child_event_delay(kind: str, event_type: str, obj: dict[str, Any]) -> float:
    """Seconds before a child's event reconciles its job: 0 for what may decide the job (a
    terminal pod phase, a deletion, a TensorBoard Deployment), `CHILD_BATCH_SECONDS` for
    progress. Each job's replicas start together, so without the wait every pod turning
    Running is a status write of its own, and the write of a chief's exit waits behind them."""
    if event_type == DELETED or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return 0.0
    if kind == "Pod":
        phase = (obj.get("status") or {}).get("phase")
        return CHILD_BATCH_SECONDS if phase in (None, "Pending", "Running") else 0.0
    if kind == "Service":
        return CHILD_BATCH_SECONDS
    return 0.0


def _key_of(kind: str, job: dict[str, Any]) -> str:
    meta = job.get("metadata") or {}
    return job_key(kind, str(meta.get("namespace", "")), str(meta.get("name", "")))


def _namespace(obj: dict[str, Any]) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def _pod_node(pod: dict[str, Any]) -> list[str]:
    name = node_name(pod)
    return [name] if name else []


def _ready(node: dict[str, Any]) -> tuple[Any, Any]:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status"), cond.get("lastTransitionTime")
    return None, None


def _node_ready(node: dict[str, Any]) -> dict[str, Any]:
    """A Node as the controller caches it: its name and Ready condition (images, addresses,
    capacity and the other conditions are most of a Node and never read)."""
    meta = node.get("metadata") or {}
    ready = [
        c
        for c in (node.get("status") or {}).get("conditions") or []
        if isinstance(c, dict) and c.get("type") == "Ready"
    ]
    return {
        "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta},
        "status": {"conditions": ready},
    }
