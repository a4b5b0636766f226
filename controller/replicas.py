"""The bodies of a replica's Pod and headless Service, exactly as the controller creates them.

Why one module: what a replica pod looks like (name, labels, owner, env, overrides, scheduler)
is the contract with users (`kubectl get pods -l …`), with TensorFlow/XGBoost (the addresses in
the env) and with the shell (ownerReferences make garbage collection and the informers' owner
index work). Keeping it pure makes every field testable without a cluster.

- Names: pod and service are both `<job>-<type>-<index>` in the job's namespace (Kubeflow).
- Labels (`controller.labels`) on both: job name, kind, replica type and index, `job-role:
  master` on the master only, `app.kubernetes.io/managed-by: trainops`; the template's labels
  are kept (ours win on a clash). Template annotations are kept on the pod.
- ownerReferences: the job, `controller: true`, `blockOwnerDeletion: true`.
- The pod's `restartPolicy` is the one `controller.restarts.pod_restart_policy` chose: OnFailure
  or Always where the kubelet restarts the replica in place (OnFailure/Always replicas), else
  Never and the controller recreates the pod (ExitCode, Never, debug mode, no budget left).
  The template's own `restartPolicy` is overridden (seeds, 重启机制). The template spec is otherwise kept;
  `hostname`/`subdomain` are left alone — each replica has its own headless service.
- The service: `clusterIP: None`, selector job name + replica type + index, one port, the
  type's main-container port named `tfjob-port`/`xgboostjob-port` (name and number from it).
- Env: see `controller.env`.
- Debug mode (seeds, 调试模式): the main container's command becomes the type's
  `debug.replicaSpecs[].command` (default `["sleep", "inf"]`) and its args are cleared;
  `skipInitContainer` drops the init containers. Types not listed use the defaults.
- Resume (seeds, 暂停模式): every pod created after the job has been paused once (the Paused
  condition exists) gets its type's `pause.resumeSpecs[]`: `command` replaces the command and
  clears the args unless `args` is given too (a new entrypoint with the template's arguments is
  rarely meant), `args` replaces the args, `skipInitContainer` drops the init containers.
- T9k Scheduler (seeds, 调度器): `schedulerName: t9k-scheduler`, label
  `scheduling.tensorstack.dev/queue: <queue>`, annotation `scheduling.tensorstack.dev/priority:
  "<priority>"` (when set). Without it the template's `schedulerName` is kept.
- Annotation `batch.tensorstack.dev/restart-count`: see `controller.restarts`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from controller import labels as L
from controller.env import merge_env, replica_env
from controller.spec import JobView, ReplicaId, main_container
from policies.defaults import copy_json

__all__ = ["DEFAULT_DEBUG_COMMAND", "Mode", "owner_reference", "pod_body", "service_body"]

DEFAULT_DEBUG_COMMAND = ("sleep", "inf")


class Mode(Enum):
    """Which command a new pod runs."""

    TRAIN = "train"
    DEBUG = "debug"
    RESUME = "resume"


def owner_reference(job: JobView) -> dict[str, Any]:
    return {
        "apiVersion": job.obj.get("apiVersion", "batch.tensorstack.dev/v1beta1"),
        "kind": job.kind.kind,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_labels(job: JobView, rid: ReplicaId) -> dict[str, str]:
    out = {
        L.JOB_NAME: job.name,
        L.JOB_KIND: job.kind.kind,
        L.REPLICA_TYPE: rid.type,
        L.REPLICA_INDEX: str(rid.index),
        L.MANAGED_BY: L.MANAGER,
    }
    if job.is_master(rid):
        out[L.JOB_ROLE] = L.MASTER_ROLE
    return out


def selector(job: JobView, rid: ReplicaId) -> dict[str, str]:
    return {L.JOB_NAME: job.name, L.REPLICA_TYPE: rid.type, L.REPLICA_INDEX: str(rid.index)}


def pod_body(
    job: JobView,
    rid: ReplicaId,
    *,
    restart_count: int,
    mode: Mode,
    restart_policy: str = "Never",
) -> dict[str, Any]:
    rtype = job.type_of(rid.type)
    template = copy_json(rtype.template) if rtype else {}
    tmeta = template.get("metadata") or {}
    spec: dict[str, Any] = template.get("spec") or {}
    annotations = {**(tmeta.get("annotations") or {}), L.RESTART_COUNT: str(restart_count)}
    pod_labels = {**(tmeta.get("labels") or {}), **replica_labels(job, rid)}
    spec["restartPolicy"] = restart_policy
    sched = job.t9k_scheduler
    if sched is not None:
        spec["schedulerName"] = L.T9K_SCHEDULER
        pod_labels[L.QUEUE] = str(sched.get("queue", ""))
        if isinstance(sched.get("priority"), int):
            annotations[L.PRIORITY] = str(sched["priority"])
    main = main_container(job.kind, spec)
    if main is not None:
        main["env"] = merge_env(main.get("env"), replica_env(job, rid.type, rid.index))
    _override(job, rid.type, spec, main, mode)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": rid.name,
            "namespace": job.namespace,
            "labels": pod_labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def service_body(job: JobView, rid: ReplicaId) -> dict[str, Any]:
    rtype = job.type_of(rid.type)
    tmeta = (rtype.template.get("metadata") if rtype else None) or {}
    port = rtype.port if rtype else job.kind.default_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": rid.name,
            "namespace": job.namespace,
            "labels": {**(tmeta.get("labels") or {}), **replica_labels(job, rid)},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": selector(job, rid),
            "ports": [{"name": job.kind.port_name, "port": port, "targetPort": port}],
        },
    }


def _mode_entry(entries: Any, rtype: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("type") == rtype:
            return entry
    return {}


def _override(
    job: JobView, rtype: str, spec: dict[str, Any], main: dict[str, Any] | None, mode: Mode
) -> None:
    if mode is Mode.TRAIN:
        return
    if mode is Mode.DEBUG:
        entry = _mode_entry(job.debug.get("replicaSpecs"), rtype)
        if main is not None:
            main["command"] = list(entry.get("command") or DEFAULT_DEBUG_COMMAND)
            main.pop("args", None)
    else:
        entry = _mode_entry(job.pause.get("resumeSpecs"), rtype)
        if main is not None:
            if entry.get("command"):
                main["command"] = list(entry["command"])
                main.pop("args", None)
            if entry.get("args"):
                main["args"] = list(entry["args"])
    if entry.get("skipInitContainer") is True:
        spec.pop("initContainers", None)
