"""Keeping a run's log before it is lost: the shell's side of `controller.attempts`.

A keep reads the tail of the run's log through the API server (`pods/log`, `previous` when the
run is the container's `lastState`, at most `TAIL_LINES` lines and `FETCH_LIMIT` bytes) and
stores its last `max_bytes` in the job's ConfigMap `<job>-attempts` (created owned by the job,
so it goes with the job), removing the replica's older keys the plan named. The ConfigMap is
read, changed and written back conditionally (a concurrent writer makes this one fail with
Conflict and the reconcile retry); one of that name that the job does not own is left alone.

A keep never holds a restart up for longer than its requests' timeouts: a log the API server
cannot give (the pod is gone, the run was pruned, its node does not answer: a 5xx or a
timeout) or a write it refuses is logged and skipped, and the pod is deleted all the same.
Only an outage while writing the ConfigMap (no answer, 5xx, 429) raises, so the reconcile is
retried and the pod, still there, is kept the next time.
"""

from __future__ import annotations

import logging
from typing import Any

from controller import labels as L
from controller.attempts import FETCH_LIMIT, TAIL_LINES, LogKeep, tail
from kube import errors, resources
from kube.client import Client

__all__ = ["KEEP_TIMEOUT", "keep_log"]

log = logging.getLogger(__name__)

KEEP_TIMEOUT = 10.0
"""Seconds each request of a keep may take."""
STORE_TRIES = 5


async def keep_log(client: Client, job: dict[str, Any], keep: LogKeep) -> bool:
    """Keep the tail of one run's log in the job's ConfigMap; False if it could not be."""
    meta = job["metadata"]
    namespace = str(meta.get("namespace", ""))
    where = f"{namespace}/{keep.pod} ({keep.key})"
    query: dict[str, Any] = {
        "container": keep.container,
        "previous": keep.previous,
        "tailLines": TAIL_LINES,
        "limitBytes": FETCH_LIMIT,
    }
    path = resources.PODS.object_path(keep.pod, namespace, "log")
    try:
        data = await client.request("GET", path, query=query, raw=True, timeout=KEEP_TIMEOUT)
    except errors.APIError as exc:  # 5xx and timeouts too: the pod's node may be gone
        log.info("not keeping the log of %s: %s", where, exc.message or exc.reason or exc.status)
        return False
    text = tail(bytes(data or b""), keep.max_bytes)
    for _ in range(STORE_TRIES):  # keeps of one job run together: they may race
        try:
            await _store(client, job, keep, text)
            return True
        except (errors.Conflict, errors.NotFound):
            continue
        except errors.Unavailable:
            raise
        except errors.APIError as exc:
            log.warning("not keeping the log of %s: %s", where, exc.message or exc.reason)
            return False
    log.warning("not keeping the log of %s: the ConfigMap kept changing", where)
    return False


async def _store(client: Client, job: dict[str, Any], keep: LogKeep, text: str) -> None:
    meta = job["metadata"]
    namespace = str(meta.get("namespace", ""))
    try:
        current = await client.get(
            resources.CONFIGMAPS, keep.config_map, namespace, timeout=KEEP_TIMEOUT
        )
    except errors.NotFound:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": keep.config_map,
                "namespace": namespace,
                "labels": {L.JOB_NAME: str(meta.get("name", "")), L.MANAGED_BY: L.MANAGER},
                "ownerReferences": [_owner(job)],
            },
            "data": {keep.key: text},
        }
        await client.create(resources.CONFIGMAPS, body, namespace, timeout=KEEP_TIMEOUT)
        return
    owners = (current.get("metadata") or {}).get("ownerReferences") or []
    if not any(o.get("uid") == meta.get("uid") for o in owners if isinstance(o, dict)):
        raise errors.APIError(0, "NotOwned", f"configmap {keep.config_map} is not the job's")
    data = dict(current.get("data") or {})
    for key in keep.drop:
        data.pop(key, None)
    data[keep.key] = text
    current["data"] = data
    await client.replace(resources.CONFIGMAPS, current, namespace, timeout=KEEP_TIMEOUT)


def _owner(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": job.get("apiVersion", "batch.tensorstack.dev/v1beta1"),
        "kind": job.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
