"""One reconcile of one training job: read, plan, write status, act, record events.

Level-triggered: the key names a job (`Kind/namespace/name`), never an event. The job and its
children are read from the informers' caches: no request per reconcile. The job must never be
older than this process's own last write of it, though: the plan counts restarts in `.status`
and stamps each new pod with the count it was created with, so a job read one status write
behind would stamp a stale count. Hence `JobReads`, client-go's mutation cache in small: the
object each status write returned is kept until the informer delivers that resourceVersion (or
a newer one), and a read takes the newer of the two. A job this process has not written or
read from the API server yet (first sight in a leadership term) is read with a GET when it
already has a status (another leader may have written it a moment ago), and so is any job
after a Conflict. Any other staleness (a spec edited a moment ago) is what a fresh GET could
also miss: the status write is conditional on the resourceVersion read, so it fails with
Conflict and the key is retried with a GET. Children may be stale without
harm, because every action tolerates it: names are deterministic (a create that finds the pod is
not an error), deletes carry the pod's uid as a precondition (a newer pod of the same name
survives), and a restart already counted in status is not counted again (docs/CONTROLLER.md).
One staleness is worth avoiding all the same: a pod or Service this process created a moment
ago and its informer has not delivered yet would be created again (an AlreadyExists answer, a
wasted request per child when reconciles are quick). `Created` keeps what each create returned
until the informer has seen that resourceVersion (its own resourceVersion has passed it), and
the plan sees those objects too — client-go controllers keep "expectations" for the same reason.

Order of writes: status first (only when it changed; conditional on the resourceVersion just
read, so a concurrent writer makes this reconcile fail with Conflict and retry), then the
actions, all at once. A crash between any two steps leaves a state the next reconcile completes
without duplicating a pod or a restart. Events are handed to `emit`, which buffers them for a
background sender: a slow Events API must not slow reconciling (client-go's recorder is
asynchronous for the same reason).

A create the API server refuses (403 quota or policy, 422, … — controller/refusals.py) is not
an error of this reconcile: a Warning FailedCreate event, then a second status write after the
actions saying ReplicaFailure=True/FailedCreate with the server's message, and the reconcile
returns the refusal's retry delay (≤ 5 min) rather than raising into the work queue's back-off
(up to 1,000 s). Raising is kept for what may pass by itself: outages, 429, 5xx, conflicts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller import plan as planning
from controller import refusals
from controller.actions import REPLICA
from controller.keeplogs import keep_log
from controller.lostnodes import DEFAULT_GRACE, node_name
from controller.metrics import ControllerMetrics
from controller.status import fmt_time
from kube import errors, resources
from kube.client import Client
from kube.informer import Informer, strip_managed_fields
from kube.resources import Resource

__all__ = [
    "CHILD_BATCH_SECONDS",
    "JOB_RESOURCES",
    "Children",
    "Created",
    "JobReads",
    "Reconciler",
    "job_key",
    "parse_key",
    "without_spec",
]

log = logging.getLogger(__name__)

JOB_RESOURCES: dict[str, Resource] = {r.kind: r for r in (resources.TFJOBS, resources.XGBJOBS)}
_CHILD_RESOURCES: dict[str, Resource] = {
    "Pod": resources.PODS,
    "Service": resources.SERVICES,
    "Deployment": resources.DEPLOYMENTS,
}
CHILD_BATCH_SECONDS = 0.5
"""How long a child's progress (a pod created or Pending or Running, a Service created or
changed) waits before its job is reconciled, so that the events of one moment share one
reconcile and one status write (the Job controller of kube-controller-manager batches its pods'
events for 1 s). What decides a job — a pod that finished, failed or is going away, a child
deleted — is reconciled at once. A job's first status waits as long (`Reconciler`)."""
OWNER_INDEX = "owner"
"""The informers' index of children by the uid of their controlling owner."""


def job_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def parse_key(key: str) -> tuple[str, str, str]:
    kind, namespace, name = key.split("/", 2)
    return kind, namespace, name


def owner_uid(obj: dict[str, Any]) -> list[str]:
    """Index function: the uid of the object's controlling owner, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("uid"):
            return [str(ref["uid"])]
    return []


@dataclass(frozen=True)
class Children:
    """The informers the reconciler reads children from, each indexed by `OWNER_INDEX`;
    `nodes`: the Nodes the pods run on (lost nodes: controller/lostnodes.py), None: none read."""

    pods: Informer
    services: Informer
    deployments: Informer
    nodes: Informer | None = None


class JobReads:
    """Where a reconcile reads its job: the informer's cache, never older than this process's
    own last status write of it (module docstring). Without informers every read is a GET."""

    def __init__(self, client: Client, informers: Mapping[str, Informer] | None = None) -> None:
        self.client = client
        self.informers = dict(informers or {})
        self._written: dict[str, dict[str, Any]] = {}  # key -> the object a write returned
        self._known: set[str] = set()  # keys read from the API server or written this term
        self._suspect: set[str] = set()  # keys to read from the API server next (a Conflict)

    async def read(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """The job, or None if it is gone."""
        key = job_key(resource.kind, namespace, name)
        informer = self.informers.get(resource.kind)
        cached = informer.get(namespace, name) if informer is not None else None
        if (
            cached is not None
            and key not in self._suspect
            and (key in self._known or not cached.get("status"))
        ):
            written = self._written.get(key)
            if written is None:
                self._known.add(key)
                return cached
            newer = _newer(written, cached)
            if newer is cached:
                del self._written[key]  # the informer caught up with the write
            if newer is not None:
                return newer
        try:
            job = await self.client.get(resource, name, namespace)
        except errors.NotFound:
            self.drop(key)
            return None
        self.remember(key, job)
        return job

    def remember(self, key: str, job: dict[str, Any]) -> None:
        """`job` as the API server just returned it (a GET, a write)."""
        self._written[key] = job
        self._known.add(key)
        self._suspect.discard(key)

    def is_known(self, key: str, job: dict[str, Any]) -> bool:
        """`job` is the version of `key` this process last wrote or read from the API server.

        Its watch event then brings nothing new: the reconcile that wrote or read it has
        planned with it already. (Every status write used to echo back as one more reconcile,
        which saw whatever children had moved meanwhile and wrote again at once, undoing the
        wait `CHILD_BATCH_SECONDS` gives a child's progress.)"""
        mine = self._written.get(key)
        if mine is None:
            return False
        version = (job.get("metadata") or {}).get("resourceVersion")
        return bool(version) and version == (mine.get("metadata") or {}).get("resourceVersion")

    def forget(self, key: str) -> None:
        """Read `key` from the API server next time (someone else wrote it: a Conflict)."""
        self.drop(key)
        self._suspect.add(key)

    def drop(self, key: str) -> None:
        """Nothing more to remember of `key` (the job is gone)."""
        self._written.pop(key, None)
        self._known.discard(key)
        self._suspect.discard(key)

    def reset(self) -> None:
        """A new leadership term: what another leader wrote meanwhile is unknown."""
        self._written.clear()
        self._known.clear()
        self._suspect.clear()


class Created:
    """Children created by this process that their informer may not show yet (docstring)."""

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}

    def add(self, owner: str, kind: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self._by_owner.setdefault(owner, {})[(kind, name)] = obj

    def with_cached(
        self, owner: str, kind: str, informer: Informer, cached: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """`cached` plus the objects of `kind` created for `owner` that the informer has not
        seen yet; forgets those it has (or that cannot be compared)."""
        pending = self._by_owner.get(owner)
        if not pending:
            return cached
        names = {(c.get("metadata") or {}).get("name") for c in cached}
        seen = _int_rv(informer.resource_version)
        out = list(cached)
        for (k, name), obj in list(pending.items()):
            if k != kind:
                continue
            rv = _int_rv((obj.get("metadata") or {}).get("resourceVersion"))
            if name in names or rv is None or seen is None or seen >= rv:
                del pending[(k, name)]
            else:
                out.append(obj)
        if not pending:
            del self._by_owner[owner]
        return out


def without_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """A pod or Service as the plan reads it: metadata (without managedFields) and status, and
    of the spec only a pod's `restartPolicy` (whether the kubelet restarts it in place) and
    `nodeName` (whether its node is lost). A
    pod's spec (its containers, environment, the projected token volume the API server adds)
    is most of its size, and a cache holds four pods and four Services per job."""
    spec = obj.pop("spec", None)
    if isinstance(spec, dict):
        kept = {k: spec[k] for k in ("restartPolicy", "nodeName") if spec.get(k) is not None}
        if kept:
            obj["spec"] = kept
    return strip_managed_fields(obj)


def _int_rv(value: Any) -> int | None:
    try:
        return int(value or "")
    except ValueError:
        return None


def _newer(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """The later of two versions of one object, by resourceVersion; None if they cannot be
    compared (resourceVersions are opaque; etcd's and the embedded server's are integers, as
    client-go's integer mutation cache assumes)."""
    try:
        rv_a = int((a.get("metadata") or {}).get("resourceVersion") or "")
        rv_b = int((b.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None
    return a if rv_a > rv_b else b


class Reconciler:
    def __init__(
        self,
        client: Client,
        children: Children,
        emit: Callable[[dict[str, Any], planning.Event], None],
        metrics: ControllerMetrics,
        *,
        jobs: JobReads | None = None,
        clock: Callable[[], datetime] | None = None,
        pod_hook: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
        status_hook: Callable[[dict[str, Any], dict[str, Any], datetime], dict[str, Any]]
        | None = None,
        lost_node_grace: float = DEFAULT_GRACE,
    ) -> None:
        self.client = client
        self.lost_node_grace = lost_node_grace
        # What the plan does not decide (controller/progress_server.py): the progress env of a
        # pod being created, and `status.progress` added to the planned status.
        self.pod_hook = pod_hook
        self.status_hook = status_hook
        self.children = children
        self.jobs = jobs or JobReads(client)
        self.created = Created()
        self.emit = emit
        self.metrics = metrics
        self.clock = clock or (lambda: datetime.now(UTC))

    async def reconcile(self, key: str) -> float | None:
        """Bring one job's children and status to its spec; seconds until a timer, or None."""
        kind, namespace, name = parse_key(key)
        started = time.monotonic()
        try:
            requeue = await self._reconcile(JOB_RESOURCES[kind], namespace, name)
        except Exception as exc:
            if isinstance(exc, errors.Conflict):
                self.jobs.forget(key)  # someone else wrote it: the retry reads it fresh
            self.metrics.reconciles.labels(kind, "error").inc()
            self.metrics.errors.labels(kind, type(exc).__name__).inc()
            raise
        finally:
            self.metrics.duration.labels(kind).observe(time.monotonic() - started)
        self.metrics.reconciles.labels(kind, "success" if requeue is None else "requeue").inc()
        return requeue

    async def _reconcile(self, resource: Resource, namespace: str, name: str) -> float | None:
        job = await self.jobs.read(resource, namespace, name)
        if job is None:
            return None  # deleted: the garbage collector removes its children (ownerReferences)
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return None
        now = self.clock()
        result = self._plan(job, now)
        # A job's first reconcile (no status yet) creates its children and writes no status
        # unless a create was refused: its first status is written by the reconcile its
        # children's events bring `CHILD_BATCH_SECONDS` later (requeued for then as well), with
        # whatever they did meanwhile. One write where "Creating", "Pending" with the pods'
        # uids and "Running" were up to three (a status write costs kube-apiserver every CEL
        # rule of the CRD), and a pod that finishes at once is not reported behind a write in
        # flight. Safe only while every action is a create: names are deterministic, so a
        # crash in between is completed by the next reconcile. A delete means a restart was
        # counted (a replica failed before the job had a status, its crash-loop delay already
        # over) or a job ended: that status is written first, as in any later reconcile
        # (module docstring), or the count is lost with the pod.
        creates_first = (
            not job.get("status")
            and bool(result.actions)
            and all(a.verb == "create" for a in result.actions)
        )
        if result.status != (job.get("status") or {}) and not creates_first:
            job = await self._write_status(resource, job, result.status)
        # Independent of each other (each tolerates a stale view), so sent together; all of
        # them finish before this reconcile ends (the key is not handed out again meanwhile),
        # and the events of the status just written are emitted whatever failed.
        outcomes = await asyncio.gather(
            *(self._execute(job, a) for a in result.actions), return_exceptions=True
        )
        # SuccessfulCreate names only the pods created; the replica pods and Services the API
        # server refused are named, with its reason, in the status (controller/refusals.py).
        creates = [
            (a, o) for a, o in zip(result.actions, outcomes, strict=True) if a.verb == "create"
        ]
        refused: dict[tuple[str, str], str] = {
            (a.kind, a.name): o for a, o in creates if isinstance(o, str) and a.reason == REPLICA
        }
        not_created = {a.name for a, o in creates if a.kind == "Pod" and o is not True}
        for event in refusals.confirmed_events(result.events, not_created):
            self.emit(job, event)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if creates_first and not any(isinstance(o, str) for o in outcomes):  # none refused
            timers = [t for t in (result.requeue_after, CHILD_BATCH_SECONDS) if t is not None]
            return min(timers)
        planned = self._plan(job, now).status if creates_first else result.status
        status = refusals.with_refused_creates(planned, refused, fmt_time(now))
        if status != (job.get("status") or {}):
            await self._write_status(resource, job, status)
        retry = refusals.retry_after(status, now)
        if retry is None and any(isinstance(o, str) for o in outcomes):
            retry = refusals.MAX_RETRY_SECONDS  # a TensorBoard object refused: no condition
        timers = [t for t in (result.requeue_after, retry) if t is not None]
        return min(timers) if timers else None

    def _plan(self, job: dict[str, Any], now: datetime) -> planning.Plan:
        """The plan from the informers' children (and those created since, `Created`)."""
        uid = str(job["metadata"].get("uid", ""))
        pods = self.created.with_cached(
            uid, "Pod", self.children.pods, self.children.pods.by_index(OWNER_INDEX, uid)
        )
        services = self.created.with_cached(
            uid,
            "Service",
            self.children.services,
            self.children.services.by_index(OWNER_INDEX, uid),
        )
        tensorboards = self.children.deployments.by_index(OWNER_INDEX, uid)
        nodes: dict[str, dict[str, Any]] = {}
        if self.children.nodes is not None:
            for pod in pods:
                name = node_name(pod)
                node = self.children.nodes.get(None, name) if name else None
                if name and node is not None:
                    nodes[name] = node
        result = planning.plan(
            job,
            pods,
            services,
            now,
            tensorboard=tensorboards[0] if tensorboards else None,
            nodes=nodes,
            lost_node_grace=self.lost_node_grace,
        )
        if self.status_hook is None:
            return result
        return dataclasses.replace(result, status=self.status_hook(job, result.status, now))

    async def _write_status(
        self, resource: Resource, job: dict[str, Any], status: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace `.status`, conditional on the resourceVersion read (Conflict → retry).

        The body carries no `spec`: the status subresource keeps the stored one whatever the
        body says, and a job's spec (pod templates) is most of what the API server would decode
        and prune on every status write for nothing."""
        body = {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "metadata": {
                "name": job["metadata"]["name"],
                "namespace": job["metadata"].get("namespace"),
                "resourceVersion": job["metadata"].get("resourceVersion"),
            },
            "status": status,
        }
        written = await self.client.replace(resource, body, subresource="status")
        meta = job["metadata"]
        self.jobs.remember(job_key(resource.kind, meta.get("namespace", ""), meta["name"]), written)
        return written

    async def _execute(self, job: dict[str, Any], action: planning.Action) -> bool | str:
        """Carry out `action`: True if done, False if there was nothing to do, the API server's
        message if it refused a create (controller/refusals.py says which answers are
        refusals); anything else (an outage, 429, 5xx) raises, for the work queue to retry."""
        namespace = str(job["metadata"].get("namespace", ""))
        resource = _CHILD_RESOURCES[action.kind]
        if action.verb == "create":
            assert action.body is not None
            body = action.body
            if self.pod_hook is not None and action.kind == "Pod":
                body = self.pod_hook(job, body)
            try:
                created = await self.client.create(resource, body, namespace)
            except errors.AlreadyExists:
                return False  # created before (a stale cache or a crash): names are deterministic
            except errors.APIError as exc:
                if not refusals.is_refusal(exc.status):
                    raise
                # Say so on the job, as the Job and ReplicaSet controllers do (FailedCreate);
                # the reconcile succeeds and retries after a bounded back-off.
                why = exc.message or exc.reason or f"HTTP {exc.status}"
                message = f"creating {action.kind} {action.name}: {why}"
                log.warning("%s/%s: %s", namespace, job["metadata"]["name"], message)
                self.emit(job, planning.Event("Warning", "FailedCreate", message))
                return why
            if action.kind in ("Pod", "Service"):
                owner = str(job["metadata"].get("uid", ""))
                # as the informers keep them (`without_spec`)
                self.created.add(owner, action.kind, without_spec(created))
        elif action.verb == "keep":
            assert action.keep_log is not None
            if not await keep_log(self.client, job, action.keep_log):
                return False
        elif action.verb == "update":
            assert action.body is not None
            try:
                # The body carries the live uid: a newer object of that name answers Conflict.
                await self.client.replace(resource, action.body, namespace)
            except (errors.NotFound, errors.Conflict):
                return False  # gone, or replaced by a newer one: the next round sees which
            except errors.APIError as exc:
                if not refusals.is_refusal(exc.status):
                    raise
                why = exc.message or exc.reason or f"HTTP {exc.status}"
                message = f"updating {action.kind} {action.name}: {why}"
                log.warning("%s/%s: %s", namespace, job["metadata"]["name"], message)
                self.emit(job, planning.Event("Warning", "FailedUpdate", message))
                return why
        else:
            if action.keep_log is not None:  # the run's log first: the delete loses it
                await keep_log(self.client, job, action.keep_log)
            preconditions = {"uid": action.uid} if action.uid else None
            try:
                await self.client.delete(
                    resource,
                    action.name,
                    namespace,
                    preconditions=preconditions,
                    propagation_policy="Background",
                    grace_period_seconds=0 if action.force else None,
                )
            except (errors.NotFound, errors.Conflict):
                return False  # gone already, or a newer object of that name (uid precondition)
        self.metrics.actions.labels(action.verb, action.kind).inc()
        log.info("%s %s %s/%s: %s", action.verb, action.kind, namespace, action.name, action.reason)
        return True
