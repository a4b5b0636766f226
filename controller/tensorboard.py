"""The job's TensorBoard: a Deployment and a Service, and `status.tensorboard`.

Why the controller runs it as plain Kubernetes objects: the seeds' T9k platform creates a
`tensorstack.dev/v1beta1 TensorBoard` through another operator, which a trainops cluster does not
have; a Deployment (`apps/v1`) and a Service give users the same thing — a TensorBoard over the
job's logs — with nothing else installed. `status.tensorboard` keeps the seed's shape (action,
dependent, note, ready, reason, type) with `dependent` naming the Deployment.

- `spec.tensorboardSpec {image, trainingLogFilesets: ["t9k://pvc/<pvc>/<path>", …]}`: a
  Deployment `<job>-tensorboard` (1 replica, owned by the job) whose container `tensorboard`
  runs `tensorboard --logdir=<dirs> --bind_all --port 6006`; each distinct PVC is one volume
  `pvc-<n>` mounted read-only at `/t9k/pvc/<pvc>`; a fileset's directory is that mount plus
  its path. One fileset gives `--logdir=<dir>`; several give `--logdir_spec=<name>:<dir>,…`
  (named `<pvc>/<path>`), because TensorBoard 2.x reads `--logdir` as one directory and moved
  the comma-separated list to `--logdir_spec` (TensorBoard 2.0 release notes) — a
  comma-joined `--logdir` would name one directory that does not exist.
- A Service `<job>-tensorboard`, port 6006 (`http`), selecting the Deployment's pods.
- Ready when the Deployment's `status.availableReplicas` ≥ 1.
- Removing `tensorboardSpec` deletes both; `status.tensorboard` then reports DELETE until the
  Deployment is gone, and disappears. The TensorBoard outlives the job's end (it is how the
  results are looked at) and is deleted with the job by garbage collection.
- `tensorboardSpec` may change (policies/update.py allows it): the Deployment follows it. Its
  annotation `batch.tensorstack.dev/tensorboard-spec-hash` is a hash of the Deployment spec
  the job asks for (image, log directories and volumes, resources); when the spec asked for
  now hashes differently, the Deployment is replaced (PUT, guarded by its uid) with the new
  one, and its own controller rolls the pod. Why a hash of what we asked for, not a comparison
  with what is stored: the API server defaults many fields of a Deployment (strategy,
  revisionHistoryLimit, the pod's terminationMessagePath, …), so the stored object never
  equals the one sent, and a comparison would have to know every default. A Deployment made
  before the annotation existed is replaced once to gain it (its pod template is unchanged,
  so nothing rolls). `status.tensorboard` says UPDATE (reason DependentUpdating) for the round
  that replaces it, with a Normal `TensorBoardUpdated` event.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from controller import labels as L
from controller.actions import Action, Event
from controller.replicas import owner_reference
from controller.spec import JobView

__all__ = [
    "PORT",
    "SPEC_HASH",
    "deployment_body",
    "logdirs",
    "plan_tensorboard",
    "service_body",
    "spec_hash",
]

PORT = 6006
SPEC_HASH = "batch.tensorstack.dev/tensorboard-spec-hash"
PREFIX = "t9k://pvc/"
MOUNT_ROOT = "/t9k/pvc/"


def name_of(job: JobView) -> str:
    return f"{job.name}-tensorboard"


def _labels(job: JobView) -> dict[str, str]:
    return {L.JOB_NAME: job.name, L.COMPONENT: L.TENSORBOARD_COMPONENT, L.MANAGED_BY: L.MANAGER}


def _split(fileset: str) -> tuple[str, str]:
    rest = fileset[len(PREFIX) :] if fileset.startswith(PREFIX) else fileset
    pvc, _, path = rest.partition("/")
    return pvc, path.strip("/")


def logdirs(filesets: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(the distinct PVCs in order, [(name, directory)] one per fileset)."""
    pvcs: list[str] = []
    dirs: list[tuple[str, str]] = []
    for fileset in filesets:
        pvc, path = _split(fileset)
        if pvc not in pvcs:
            pvcs.append(pvc)
        mount = MOUNT_ROOT + pvc
        dirs.append((f"{pvc}/{path}" if path else pvc, f"{mount}/{path}" if path else mount))
    return pvcs, dirs


def deployment_body(job: JobView, spec: dict[str, Any]) -> dict[str, Any]:
    filesets = [f for f in spec.get("trainingLogFilesets") or [] if isinstance(f, str)]
    pvcs, dirs = logdirs(filesets)
    if len(dirs) == 1:
        logdir = f"--logdir={dirs[0][1]}"
    else:
        logdir = "--logdir_spec=" + ",".join(f"{n}:{d}" for n, d in dirs)
    container: dict[str, Any] = {
        "name": "tensorboard",
        "image": spec.get("image", ""),
        "command": ["tensorboard"],
        "args": [logdir, "--bind_all", f"--port={PORT}"],
        "ports": [{"name": "http", "containerPort": PORT}],
        "volumeMounts": [
            {"name": f"pvc-{i}", "mountPath": MOUNT_ROOT + pvc, "readOnly": True}
            for i, pvc in enumerate(pvcs)
        ],
    }
    if isinstance(spec.get("resources"), dict):
        container["resources"] = spec["resources"]
    labels = _labels(job)
    deployment_spec = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "containers": [container],
                "volumes": [
                    {
                        "name": f"pvc-{i}",
                        "persistentVolumeClaim": {"claimName": pvc, "readOnly": True},
                    }
                    for i, pvc in enumerate(pvcs)
                ],
            },
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name_of(job),
            "namespace": job.namespace,
            "labels": labels,
            "annotations": {SPEC_HASH: spec_hash(deployment_spec)},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": deployment_spec,
    }


def spec_hash(deployment_spec: dict[str, Any]) -> str:
    """A short, stable digest of a Deployment spec as we ask for it (keys sorted)."""
    text = json.dumps(deployment_spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def service_body(job: JobView) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name_of(job),
            "namespace": job.namespace,
            "labels": _labels(job),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "selector": _labels(job),
            "ports": [{"name": "http", "port": PORT, "targetPort": PORT}],
        },
    }


def _dependent(job: JobView, deployment: dict[str, Any] | None) -> dict[str, Any]:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name_of(job)}
    dep["namespace"] = job.namespace
    uid = ((deployment or {}).get("metadata") or {}).get("uid")
    if uid:
        dep["uid"] = uid
    return dep


def _delete_deployment(name: str, uid: str | None) -> Action:
    return Action("delete", "Deployment", name, uid=uid, reason="tensorboardSpec removed")


def _delete_service(name: str, uid: str | None) -> Action:
    return Action("delete", "Service", name, uid=uid, reason="tensorboardSpec removed")


def plan_tensorboard(
    job: JobView,
    deployment: dict[str, Any] | None,
    service: dict[str, Any] | None,
    old: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, list[Action], list[Event]]:
    """(next `status.tensorboard` or None, actions, events)."""
    spec = job.tensorboard_spec
    name = name_of(job)
    actions: list[Action] = []
    if spec is None:
        for obj, delete in ((deployment, _delete_deployment), (service, _delete_service)):
            if obj is not None and not (obj.get("metadata") or {}).get("deletionTimestamp"):
                actions.append(delete(name, (obj.get("metadata") or {}).get("uid")))
        if deployment is None:
            return None, actions, []
        status = {
            "action": "DELETE",
            "dependent": _dependent(job, deployment),
            "note": f"TensorBoard [{name}] is being deleted",
            "ready": False,
            "reason": "DependentDeleting",
            "type": "Normal",
        }
        events = (
            []
            if (old or {}).get("action") == "DELETE"
            else [Event("Normal", "TensorBoardDeleted", f"deleting TensorBoard {name}")]
        )
        return status, actions, events
    if service is None:
        actions.append(
            Action("create", "Service", name, body=service_body(job), reason="tensorboard")
        )
    if deployment is None:
        actions.append(
            Action(
                "create", "Deployment", name, body=deployment_body(job, spec), reason="tensorboard"
            )
        )
        status = {
            "action": "CREATE",
            "dependent": _dependent(job, None),
            "note": f"TensorBoard [{name}] is being created",
            "ready": False,
            "reason": "DependentCreating",
            "type": "Normal",
        }
        events = (
            []
            if (old or {}).get("action") == "CREATE"
            else [Event("Normal", "TensorBoardCreated", f"creating TensorBoard {name}")]
        )
        return status, actions, events
    meta = deployment.get("metadata") or {}
    desired = deployment_body(job, spec)
    wanted = desired["metadata"]["annotations"][SPEC_HASH]
    if (meta.get("annotations") or {}).get(SPEC_HASH) != wanted and not meta.get(
        "deletionTimestamp"
    ):
        uid = meta.get("uid")
        if uid:
            desired["metadata"]["uid"] = uid  # PUT refuses (409) a newer object of this name
        actions.append(
            Action("update", "Deployment", name, body=desired, uid=uid, reason="tensorboardSpec")
        )
        status = {
            "action": "UPDATE",
            "dependent": _dependent(job, deployment),
            "note": f"TensorBoard [{name}] is being updated",
            "ready": False,
            "reason": "DependentUpdating",
            "type": "Normal",
        }
        events = (
            []
            if (old or {}).get("action") == "UPDATE"
            else [Event("Normal", "TensorBoardUpdated", f"updating TensorBoard {name}")]
        )
        return status, actions, events
    available = (deployment.get("status") or {}).get("availableReplicas")
    ready = isinstance(available, int) and available >= 1
    status = {
        "action": "NOP",
        "dependent": _dependent(job, deployment),
        "note": f"TensorBoard [{name}] is ready"
        if ready
        else f"TensorBoard [{name}] is not ready yet",
        "ready": ready,
        "reason": "DependentReady" if ready else "DependentNotReady",
        "type": "Normal",
    }
    return status, actions, []
