"""A minimal Deployment controller (for TensorBoard and similar long-running helpers).

As in Kubernetes, a Deployment owns one ReplicaSet per pod template (`<deployment>-<hash>`,
labelled and selecting `pod-template-hash`, annotated with its `deployment.kubernetes.io/
revision`), and each ReplicaSet owns its pods (`<replicaset>-<5 chars>`), so `kubectl get rs`,
`kubectl rollout history` and cascading deletion behave as users expect. Simplification,
stated plainly: this one controller plays both the Deployment and the ReplicaSet controller,
for ReplicaSets that Deployments own; a ReplicaSet created on its own gets no pods.
`plan_deployment` (pure) decides which ReplicaSet to create, which pods to create and delete,
each ReplicaSet's replicas and status, and the Deployment's status; `DeploymentController`
lists, applies the plan and patches the status subresources.

Rollout: `RollingUpdate` creates all pods of the new template at once and deletes the old ones
when every new pod is ready (a surge to twice the replicas, never fewer ready pods than before);
`Recreate` deletes the old pods first and creates new ones when they are gone. Pods that ended
(Succeeded/Failed) are replaced. `minReadySeconds`, `paused`, `progressDeadlineSeconds` and
`revisionHistoryLimit` are not implemented. The status fields are those `kubectl rollout
status` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from kube import resources
from kube.errors import APIError
from kube.resources import Resource
from localcluster.client.clock import rfc3339, utcnow
from localcluster.client.kube import Kube

__all__ = [
    "DeploymentController",
    "DeploymentPlan",
    "ReplicaSetUpdate",
    "plan_deployment",
    "template_hash",
]

log = logging.getLogger("trainops.deployments")

_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated suffixes


REVISION = "deployment.kubernetes.io/revision"


@dataclass(frozen=True)
class ReplicaSetUpdate:
    """What one existing ReplicaSet of the Deployment should say after this round."""

    name: str
    replicas: int
    status: dict[str, Any]
    revision: str = ""  # the revision annotation it should carry ("" = leave it)


@dataclass(frozen=True)
class DeploymentPlan:
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    # The ReplicaSet of the current template when it does not exist yet: created first, and
    # its pods on the next round (they need its uid as their owner).
    create_replica_set: dict[str, Any] | None = None
    replica_sets: list[ReplicaSetUpdate] = field(default_factory=list)
    # The Deployment's own revision annotation (that of its current ReplicaSet), which
    # `kubectl rollout undo` reads and patches.
    revision: str = ""


def template_hash(template: dict[str, Any]) -> str:
    """The `pod-template-hash` of a template, ignoring that label itself and null fields.

    `kubectl rollout undo` copies an old ReplicaSet's template (label removed) and sends
    `metadata.creationTimestamp: null`, which a real API server drops while decoding; both
    must hash like the original so the old ReplicaSet is reused rather than a twin made.
    """
    template = _without_nulls(template)
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and "pod-template-hash" in labels:
        labels.pop("pod-template-hash")
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _ended(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _hash_of(obj: dict[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get("pod-template-hash", ""))


def plan_deployment(
    deploy: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    now: str,
    suffix: Any = None,
    replica_sets: list[dict[str, Any]] | None = None,
) -> DeploymentPlan:
    """Pods to create and delete, and the status, for one Deployment and the pods it owns
    (directly or through `replica_sets`, the ReplicaSets it owns).

    `suffix()` returns the random 5-character pod name suffix (injected for tests). Without
    `replica_sets` (None) pods are owned by the Deployment itself, as before ReplicaSets were
    served; with a list, by the ReplicaSet of their template.
    """
    plan = _plan_pods(deploy, pods, now=now, suffix=suffix)
    if replica_sets is None:
        return plan
    return _with_replica_sets(deploy, pods, plan, replica_sets)


def _with_replica_sets(
    deploy: dict[str, Any],
    pods: list[dict[str, Any]],
    plan: DeploymentPlan,
    replica_sets: list[dict[str, Any]],
) -> DeploymentPlan:
    spec = deploy.get("spec") or {}
    h = template_hash(spec.get("template") or {})
    by_hash = {_hash_of(rs): rs for rs in replica_sets}
    current = by_hash.get(h)
    if current is None:
        revision = 1 + max((_revision(rs) for rs in replica_sets), default=0)
        return DeploymentPlan(
            [],
            plan.delete,
            plan.status,
            create_replica_set=_replica_set(deploy, h, revision),
        )
    rs_meta = current["metadata"]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": rs_meta["name"],
        "uid": rs_meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    create = [
        {
            **p,
            "metadata": {
                **p["metadata"],
                "name": f"{rs_meta['name']}-{p['metadata']['name'].rsplit('-', 1)[-1]}",
                "ownerReferences": [owner],
            },
        }
        for p in plan.create
    ]
    deleted = set(plan.delete)
    active = [
        p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp") and not _ended(p)
    ]
    # Rolling back to an older template makes its ReplicaSet the newest revision again.
    newest = max((_revision(rs) for rs in replica_sets), default=0)
    others = max((_revision(rs) for rs in replica_sets if rs is not current), default=0)
    current_revision = str(_revision(current) if _revision(current) > others else newest + 1)
    updates = []
    for rs_hash, rs in sorted(by_hash.items()):
        mine = [p for p in active if _hash_of(p) == rs_hash]
        staying = [p for p in mine if p["metadata"]["name"] not in deleted]
        replicas = int(spec.get("replicas", 1)) if rs_hash == h else len(staying)
        ready = sum(1 for p in mine if _ready(p))
        status = {
            "replicas": len(mine),
            "fullyLabeledReplicas": len(mine),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": (rs.get("metadata") or {}).get("generation", 1),
        }
        updates.append(
            ReplicaSetUpdate(
                rs["metadata"]["name"], replicas, status, current_revision if rs is current else ""
            )
        )
    return DeploymentPlan(
        create, plan.delete, plan.status, replica_sets=updates, revision=current_revision
    )


def _revision(rs: dict[str, Any]) -> int:
    value = ((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0")
    return int(value) if str(value).isdigit() else 0


def _replica_set(deploy: dict[str, Any], h: str, revision: int) -> dict[str, Any]:
    meta = deploy["metadata"]
    spec = deploy.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), "pod-template-hash": h}
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), "pod-template-hash": h}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{h}",
            "namespace": meta.get("namespace", "default"),
            "labels": dict(tmeta["labels"]),
            "annotations": {
                REVISION: str(revision),
                "deployment.kubernetes.io/desired-replicas": str(int(spec.get("replicas", 1))),
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": int(spec.get("replicas", 1)),
            "selector": selector,
            "template": template,
        },
    }


def _plan_pods(
    deploy: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    now: str,
    suffix: Any = None,
) -> DeploymentPlan:
    make_suffix = suffix or (lambda: "".join(secrets.choice(_SAFE) for _ in range(5)))
    meta = deploy["metadata"]
    spec = deploy.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    template = spec.get("template") or {}
    h = template_hash(template)
    strategy = (spec.get("strategy") or {}).get("type") or "RollingUpdate"

    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    ended = [p for p in live if _ended(p)]
    active = [p for p in live if not _ended(p)]
    new = [p for p in active if (p["metadata"].get("labels") or {}).get("pod-template-hash") == h]
    old = [p for p in active if p not in new]

    delete = [p["metadata"]["name"] for p in ended]
    create: list[dict[str, Any]] = []
    if strategy == "Recreate" and old:
        delete += [p["metadata"]["name"] for p in old]
    else:
        if len(new) < replicas:
            for _ in range(replicas - len(new)):
                create.append(_pod(deploy, template, h, make_suffix()))
        elif len(new) > replicas:
            # Scale down: not-ready pods first, then the newest.
            order = sorted(
                new,
                key=lambda p: (_ready(p), p["metadata"].get("creationTimestamp", "")),
            )
            surplus = order[: len(new) - replicas]
            delete += [p["metadata"]["name"] for p in surplus]
            new = [p for p in new if p not in surplus]
        if old and sum(1 for p in new if _ready(p)) >= replicas:
            delete += [p["metadata"]["name"] for p in old]

    ready = sum(1 for p in active if _ready(p))
    updated = len(new)
    available = ready
    complete = updated >= replicas and not old and available >= replicas
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len(active),
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
    }
    if replicas - available > 0:
        status["unavailableReplicas"] = replicas - available
    old_conds = {c.get("type"): c for c in (deploy.get("status") or {}).get("conditions") or []}

    def cond(kind: str, value: str, reason: str, message: str) -> dict[str, Any]:
        prev = old_conds.get(kind)
        since = prev.get("lastTransitionTime") if prev and prev.get("status") == value else None
        unchanged = prev is not None and prev.get("reason") == reason and since
        return {
            "type": kind,
            "status": value,
            "lastUpdateTime": prev.get("lastUpdateTime", now) if unchanged and prev else now,
            "lastTransitionTime": since or now,
            "reason": reason,
            "message": message,
        }

    name = meta["name"]
    conditions = [
        cond(
            "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
        )
        if available >= replicas
        else cond(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        ),
        cond(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'Deployment "{name}" has successfully progressed.',
        )
        if complete
        else cond(
            "Progressing", "True", "ReplicaSetUpdated", f'Deployment "{name}" is progressing.'
        ),
    ]
    status["conditions"] = conditions
    return DeploymentPlan(create, delete, status)


def _pod(deploy: dict[str, Any], template: dict[str, Any], h: str, suffix: str) -> dict[str, Any]:
    meta = deploy["metadata"]
    tmeta = copy.deepcopy(template.get("metadata") or {})
    labels = {**(tmeta.get("labels") or {}), "pod-template-hash": h}
    pod_meta: dict[str, Any] = {
        "name": f"{meta['name']}-{h}-{suffix}",
        "namespace": meta.get("namespace", "default"),
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = tmeta["annotations"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


class DeploymentController:
    """Reconciles every Deployment on any pod or Deployment change, and every few seconds."""

    def __init__(self, kube: Kube, *, resync_seconds: float = 5.0) -> None:
        self.kube = kube
        self.resync_seconds = resync_seconds
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._loop(), name="deployments"),
            asyncio.create_task(self._watch(resources.DEPLOYMENTS), name="deploy-watch"),
            asyncio.create_task(self._watch(resources.PODS), name="deploy-pod-watch"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def _watch(self, resource: Resource) -> None:
        while True:
            try:
                _, rv = await self.kube.list_all(resource)
                async for _kind, _obj in self.kube.watch(resource, rv):
                    self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("watch ended: %s", e)
                await asyncio.sleep(1.0)

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.reconcile_all()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("deployment reconcile failed: %s", e)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.resync_seconds):
                    await self._wake.wait()

    async def reconcile_all(self) -> None:
        deployments, _ = await self.kube.list_deployments()
        if not deployments:
            return
        pods, _ = await self.kube.list_pods()
        replica_sets = await self.kube.list_replica_sets()
        owned_sets: dict[str, list[dict[str, Any]]] = {}
        rs_owner: dict[str, str] = {}  # ReplicaSet uid -> Deployment uid
        for rs in replica_sets:
            meta = rs.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "Deployment" and ref.get("controller"):
                    owned_sets.setdefault(ref.get("uid", ""), []).append(rs)
                    rs_owner[meta.get("uid", "")] = ref.get("uid", "")
        owned: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            for ref in (p.get("metadata") or {}).get("ownerReferences") or []:
                if not ref.get("controller"):
                    continue
                if ref.get("kind") == "Deployment":  # pods of an older trainops
                    owned.setdefault(ref.get("uid", ""), []).append(p)
                elif ref.get("kind") == "ReplicaSet" and ref.get("uid") in rs_owner:
                    owned.setdefault(rs_owner[ref["uid"]], []).append(p)
        for d in deployments:
            if (d.get("metadata") or {}).get("deletionTimestamp"):
                continue
            uid = d["metadata"].get("uid", "")
            await self._reconcile(d, owned.get(uid, []), owned_sets.get(uid, []))

    async def _reconcile(
        self, d: dict[str, Any], pods: list[dict[str, Any]], replica_sets: list[dict[str, Any]]
    ) -> None:
        ns = d["metadata"].get("namespace", "default")
        plan = plan_deployment(d, pods, now=rfc3339(utcnow()), replica_sets=replica_sets)
        if plan.create_replica_set is not None:
            try:
                created = await self.kube.create_replica_set(ns, plan.create_replica_set)
            except APIError as e:
                log.debug("replica set not created: %s", e)
                return
            # Its pods now, not at the next resync: they only needed its uid.
            replica_sets = [*replica_sets, created]
            plan = plan_deployment(d, pods, now=rfc3339(utcnow()), replica_sets=replica_sets)
        for pod in plan.create:
            with contextlib.suppress(APIError):
                await self.kube.create_pod(ns, pod)
        for name in plan.delete:
            with contextlib.suppress(APIError):
                await self.kube.delete_pod(ns, name)
        current = {rs["metadata"]["name"]: rs for rs in replica_sets}
        for update in plan.replica_sets:
            rs = current.get(update.name) or {}
            with contextlib.suppress(APIError):
                if update.revision and _annotation(rs, REVISION) != update.revision:
                    await self.kube.annotate("ReplicaSet", ns, rs, REVISION, update.revision)
                if (rs.get("spec") or {}).get("replicas") != update.replicas:
                    await self.kube.scale_replica_set(ns, update.name, update.replicas)
                if _changed(rs.get("status") or {}, update.status):
                    await self.kube.patch_replica_set_status(ns, update.name, update.status)
        if plan.revision and _annotation(d, REVISION) != plan.revision:
            with contextlib.suppress(APIError):
                await self.kube.annotate("Deployment", ns, d, REVISION, plan.revision)
        if _changed(d.get("status") or {}, plan.status):
            with contextlib.suppress(APIError):
                await self.kube.patch_deployment_status(ns, d["metadata"]["name"], plan.status)


def _annotation(obj: dict[str, Any], key: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key, ""))


def _changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return any(old.get(k) != v for k, v in new.items()) or bool(set(old) - set(new))
