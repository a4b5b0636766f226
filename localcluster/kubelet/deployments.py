"""A minimal Deployment controller (for TensorBoard and similar long-running helpers).

Simplification, stated plainly: a real Deployment owns ReplicaSets which own pods; here the
Deployment owns its pods directly (ownerReference `controller: true`), named like a real
ReplicaSet's pods, `<deployment>-<pod-template-hash>-<5 chars>`, and labelled
`pod-template-hash`. `plan_deployment` (pure) decides which pods to create and delete and the
next status; `DeploymentController` lists, applies the plan and patches `deployments/status`.

Rollout: `RollingUpdate` creates all pods of the new template at once and deletes the old ones
when every new pod is ready (a surge to twice the replicas, never fewer ready pods than before);
`Recreate` deletes the old pods first and creates new ones when they are gone. Pods that ended
(Succeeded/Failed) are replaced. `minReadySeconds`, `paused` and `progressDeadlineSeconds` are
not implemented. The status fields are those `kubectl rollout status` reads.
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

from localcluster.kubelet.clock import rfc3339, utcnow
from localcluster.kubelet.kube import ApiException, Kube, read_json

__all__ = ["DeploymentController", "DeploymentPlan", "plan_deployment", "template_hash"]

log = logging.getLogger("trainops.deployments")

_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated suffixes


@dataclass(frozen=True)
class DeploymentPlan:
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)


def template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _ended(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def plan_deployment(
    deploy: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    now: str,
    suffix: Any = None,
) -> DeploymentPlan:
    """Pods to create and delete, and the status, for one Deployment and the pods it owns.

    `suffix()` returns the random 5-character pod name suffix (injected for tests).
    """
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
            asyncio.create_task(
                self._watch(self.kube.apps.list_deployment_for_all_namespaces), name="deploy-watch"
            ),
            asyncio.create_task(
                self._watch(self.kube.core.list_pod_for_all_namespaces), name="deploy-pod-watch"
            ),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def _watch(self, list_fn: Any) -> None:
        while True:
            try:
                body = await read_json(await list_fn(_preload_content=False))
                rv = body["metadata"].get("resourceVersion", "")
                async for _kind, _obj in self.kube.watch(list_fn, rv):
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
        owned: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            for ref in (p.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("kind") == "Deployment" and ref.get("controller"):
                    owned.setdefault(ref.get("uid", ""), []).append(p)
        for d in deployments:
            if (d.get("metadata") or {}).get("deletionTimestamp"):
                continue
            plan = plan_deployment(
                d, owned.get(d["metadata"].get("uid", ""), []), now=rfc3339(utcnow())
            )
            ns = d["metadata"].get("namespace", "default")
            for pod in plan.create:
                with contextlib.suppress(ApiException):
                    await self.kube.create_pod(ns, pod)
            for name in plan.delete:
                with contextlib.suppress(ApiException):
                    await self.kube.delete_pod(ns, name)
            old = d.get("status") or {}
            if any(old.get(k) != v for k, v in plan.status.items()) or set(old) - set(plan.status):
                with contextlib.suppress(ApiException):
                    await self.kube.patch_deployment_status(ns, d["metadata"]["name"], plan.status)
