"""The process kubelet: registers the Node, watches its pods, runs them as local processes.

Data flow:

    API server ──list+watch pods (spec.nodeName=<node>)──▶ Kubelet ──▶ PodWorker per uid
                                                              │            │ runtime (shim processes)
    API server ◀──patch pods/status, events, delete(grace 0)──┘◀───────────┘
    API server ◀──Node status, Lease renewals (heartbeat)

Level-triggered: a watch event, a container exit (the shim's parent sees it) or a timer only
pokes the pod's worker, which then compares the whole desired pod with the whole set of
instances on disk. Workers also wake up every `resync_seconds` on their own.

On start, pod directories left by a previous run are matched with the pods the API server still
binds to this node: running instances are adopted (they kept running under their shims), pods
that are gone get their processes stopped and their files removed. On `stop()`, every container
is stopped (SIGTERM, SIGKILL after min(grace, `shutdown_grace_seconds`)) and its final state
reported, so a later start resumes from what happened, per restart policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kube import resources
from kube.errors import APIError
from localcluster.client.clock import micro_time, rfc3339, utcnow
from localcluster.client.kube import Kube
from localcluster.kubelet import images, names, netns
from localcluster.kubelet import node as nodes
from localcluster.kubelet.execserver import ExecServer
from localcluster.kubelet.expansion import NodeFacts
from localcluster.kubelet.logserver import LogServer
from localcluster.kubelet.model import BackOffPolicy
from localcluster.kubelet.podworker import PodWorker
from localcluster.kubelet.portforward import PortForwardServer
from localcluster.kubelet.runtime import Runtime

__all__ = ["INHERITED_ENV", "Kubelet", "KubeletConfig"]

log = logging.getLogger("trainops.kubelet")


# What pod processes inherit from the kubelet's environment (the user's tools and libraries
# must work); `TRAINOPS_PASS_ENV=A,B` adds more names.
INHERITED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_VISIBLE_DEVICES",
)


@dataclass(frozen=True)
class KubeletConfig:
    data_dir: Path
    client_ca: bytes
    """PEM of the CA whose client certificates the log endpoint accepts (`--client-ca-file`)."""
    node_name: str = "trainops"
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the Node carries besides the kubelet's own."""
    backoff: BackOffPolicy = field(default_factory=BackOffPolicy)
    resync_seconds: float = 10.0
    heartbeat_seconds: float = 10.0
    shutdown_grace_seconds: float = 10.0
    # A network namespace per pod where the machine allows it (docs/KUBELET.md, networking);
    # False: every pod shares the host's network.
    pod_network: bool = True
    # Python environments standing for images (`trainops up --image PATTERN=ENV_DIR`).
    images: tuple[images.ImageEnv, ...] = ()


# How long `stop` waits, after the pods are ended, for their shims to exit (twice at most:
# before and after killing what still runs) and for the last events to be recorded.
SHIMS_SECONDS = 5.0
EVENTS_SECONDS = 5.0


class Kubelet:
    def __init__(self, kube: Kube, config: KubeletConfig) -> None:
        self.kube = kube
        self.config = config
        self.runtime = Runtime(config.data_dir, on_exit=self._on_exit)
        self.workers: dict[str, PodWorker] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.shutting_down = False
        self.hurry = False  # set by `force_stop`: shutdown stops waiting for grace periods
        streaming = (
            ExecServer(self.runtime, self._lookup),
            PortForwardServer(self.runtime, self._lookup),
        )
        self.logs = LogServer(
            self.runtime,
            self._lookup,
            client_ca=config.client_ca,
            streaming=streaming,
            last_terminated=self._last_terminated,
        )
        self.facts = nodes.machine_facts(config.data_dir)
        extra = [n.strip() for n in os.environ.get("TRAINOPS_PASS_ENV", "").split(",") if n.strip()]
        self.inherited_env = {k: os.environ[k] for k in (*INHERITED_ENV, *extra) if k in os.environ}
        self.node_facts = NodeFacts(
            node_name=config.node_name,
            allocatable_cpu=str(self.facts.cpus),
            allocatable_memory=f"{self.facts.memory_kib}Ki",
            allocatable_ephemeral_storage=str(self.facts.disk_bytes),
        )
        self.network = netns.PodNetworks(config.data_dir, allowed=config.pod_network)
        self.names = names.ServiceNames(kube, self._pod_names)
        self._tasks: list[asyncio.Task[None]] = []
        self._events: set[asyncio.Task[None]] = set()
        self._event_tail: asyncio.Task[None] | None = None
        self._event_index: dict[tuple[str, ...], tuple[str, int]] = {}
        self._node_uid = ""
        self._node_status: dict[str, Any] | None = None
        self._started_at = rfc3339(utcnow())
        self.synced = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        port = await self.logs.start()
        desired = nodes.node_object(self.config.node_name, self.config.node_labels)
        node = await self.kube.ensure_node(desired)
        self._node_uid = node["metadata"].get("uid", "")
        labels = desired["metadata"]["labels"]
        current = node["metadata"].get("labels") or {}
        if any(current.get(k) != v for k, v in labels.items()):  # a node from an older version
            await self.kube.label_node(self.config.node_name, labels)
        await self._post_node_status(port)
        await self._start_network(node)
        with contextlib.suppress(APIError):
            await self.kube.ensure_namespace("kube-node-lease")
        self._tasks.append(asyncio.create_task(self._heartbeat(), name="kubelet-heartbeat"))
        if self.network.enabled:
            self._tasks.append(asyncio.create_task(self.names.run(), name="kubelet-services"))
        self._tasks.append(asyncio.create_task(self._watch_pods(), name="kubelet-watch"))

    async def _start_network(self, node: dict[str, Any]) -> None:
        """Decide the network mode, clean up after an earlier run (keeping the namespaces of
        pods whose containers still run: they are adopted), publish the pod CIDR."""
        running = await asyncio.to_thread(self._running_uids)
        spec = node.get("spec") or {}
        await self.network.start(node_cidr=str(spec.get("podCIDR") or ""), keep_uids=running)
        if self.network.enabled and spec.get("podCIDR") != self.network.cidr:
            try:
                await self.kube.set_pod_cidr(self.config.node_name, self.network.cidr)
            except APIError as e:
                log.warning("node spec.podCIDR not set to %s: %s", self.network.cidr, e)

    def _running_uids(self) -> set[str]:
        return {
            str(rec["uid"])
            for rec in self.runtime.known_pods()
            if self.runtime.running_instances(str(rec["uid"]))
        }

    def shares_host_network(self, pod: dict[str, Any]) -> bool:
        return not self.network.enabled or bool((pod.get("spec") or {}).get("hostNetwork"))

    def _pod_names(self) -> list[names.PodNames]:
        return [
            w.sandbox.names(w.pod, ready=w.sandbox.dns_seen[1])
            for w in self.workers.values()
            if w.pod is not None and not w.deleted
        ]

    def force_stop(self) -> None:
        """Make a running `stop` kill the remaining containers now (SIGKILL) instead of waiting
        out their grace periods: a second Ctrl-C means the user will not wait."""
        self.hurry = True
        for w in list(self.workers.values()):
            w.poke()

    async def stop(self) -> None:
        """Stop every container, report final states, stop serving logs. Every wait is
        bounded and what it gives up on is logged (WARNING); a container process still running
        at the end is killed."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self.shutting_down = True
        for w in list(self.workers.values()):
            w.poke()
            if w.task is None or w.task.done():
                self._spawn(w)
        await self._wait_workers(self.config.shutdown_grace_seconds + 10)
        await self._wait_shims()
        try:
            await self.network.stop()
        except netns.NetworkError as e:
            log.warning("stopping: pod networks not removed (the next start retries): %s", e)
        if self._events:
            _, pending = await asyncio.wait(list(self._events), timeout=EVENTS_SECONDS)
            if pending:
                log.warning("stopping: gave up recording %d event(s)", len(pending))
        await self.logs.stop()

    async def _wait_workers(self, timeout: float) -> None:
        workers = [w for w in self.workers.values() if w.task is not None]
        if not workers:
            return
        await asyncio.wait([w.task for w in workers if w.task is not None], timeout=timeout)
        late = [w for w in workers if w.task is not None and not w.task.done()]
        if late:
            log.warning(
                "stopping: gave up after %.0f s on ending pod(s) %s; their final state is not "
                "reported",
                timeout,
                ", ".join(self._pod_name(w.uid) for w in late),
            )
            for w in late:
                if w.task is not None:
                    w.task.cancel()
            await asyncio.wait([w.task for w in late if w.task is not None], timeout=1)

    async def _wait_shims(self) -> None:
        """Wait for the shims of the ended containers to exit. One still running here was
        missed by its pod's stop; it is killed, since nothing may run on after `stop`."""
        left = await self.runtime.wait_watchers(timeout=SHIMS_SECONDS)
        if not left:
            return
        log.warning(
            "stopping: container(s) still running after their pods were ended, killing: %s",
            ", ".join(f"{self._pod_name(uid)} container {c} #{a}" for uid, c, a in left),
        )
        for uid, container, attempt in left:
            await self.runtime.signal(uid, container, attempt, signal.SIGKILL)
        left = await self.runtime.wait_watchers(timeout=SHIMS_SECONDS)
        if left:
            log.warning(
                "stopping: gave up waiting for container(s) to exit: %s",
                ", ".join(f"{self._pod_name(uid)} container {c} #{a}" for uid, c, a in left),
            )

    def _pod_name(self, uid: str) -> str:
        w = self.workers.get(uid)
        meta = ((w.pod if w is not None else None) or {}).get("metadata") or {}
        if meta.get("name"):
            return f"{meta.get('namespace', 'default')}/{meta['name']}"
        return next(
            (f"{ns}/{name}" for (ns, name), u in self.by_name.items() if u == uid), f"uid {uid}"
        )

    # -- pods ------------------------------------------------------------------------------
    async def _watch_pods(self) -> None:
        selector = f"spec.nodeName={self.config.node_name}"
        first = True
        while True:
            try:
                items, rv = await self.kube.list_pods(selector)
                listed = {p["metadata"]["uid"] for p in items}
                for pod in items:
                    self._observe("ADDED", pod)
                for uid, w in list(self.workers.items()):
                    if uid not in listed:
                        w.deleted = True
                        w.poke()
                if first:
                    self._adopt_leftovers(listed)
                    first = False
                self.synced.set()
                async for kind, obj in self.kube.watch(resources.PODS, rv, field_selector=selector):
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._observe(kind, obj)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the server restarted, a 410 Gone: list again
                log.debug("pod watch ended: %s", e)
                await asyncio.sleep(0.5)

    def _adopt_leftovers(self, listed: set[str]) -> None:
        for rec in self.runtime.known_pods():
            uid = rec["uid"]
            if uid in listed or uid in self.workers:
                continue
            w = PodWorker(self, uid)
            w.deleted = True
            self.workers[uid] = w
            self._spawn(w)

    def _observe(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        key = (meta.get("namespace", "default"), meta["name"])
        w = self.workers.get(uid)
        if w is None:
            if kind == "DELETED":
                return
            w = PodWorker(self, uid)
            self.workers[uid] = w
        w.pod = pod
        self.by_name[key] = uid
        if kind == "DELETED":
            w.deleted = True
        if w.task is None or w.task.done():
            self._spawn(w)
        w.poke()

    def _spawn(self, w: PodWorker) -> None:
        w.task = asyncio.create_task(w.run(), name=f"pod-{w.uid}")
        w.task.add_done_callback(functools.partial(self._worker_done, w.uid))

    def _worker_done(self, uid: str, task: asyncio.Task[None]) -> None:
        w = self.workers.get(uid)
        if w is not None and w.task is task and (w.deleted or w.pod is None):
            del self.workers[uid]
            for key, value in list(self.by_name.items()):
                if value == uid:
                    del self.by_name[key]
            for event_key in [k for k in self._event_index if k[1] == uid]:
                del self._event_index[event_key]

    def active_pods(self) -> list[dict[str, Any]]:
        """Pods this kubelet runs that are neither deleted nor finished."""
        return [
            w.pod
            for w in self.workers.values()
            if w.pod is not None
            and not w.deleted
            and (w.reported or w.pod.get("status") or {}).get("phase")
            not in ("Succeeded", "Failed")
        ]

    def _on_exit(self, uid: str) -> None:
        w = self.workers.get(uid)
        if w is not None:
            w.poke()

    def _lookup(self, namespace: str, name: str) -> str | None:
        uid = self.by_name.get((namespace, name))
        if uid is not None:
            return uid
        for rec in self.runtime.known_pods():
            if rec.get("namespace") == namespace and rec.get("name") == name:
                return str(rec["uid"])
        return None

    def _last_terminated(self, uid: str, container: str) -> str | None:
        """The containerID in the last reported `lastState.terminated` of `container`."""
        w = self.workers.get(uid)
        status: dict[str, Any] = {}
        if w is not None:
            status = w.reported or (w.pod or {}).get("status") or {}
        for key in ("containerStatuses", "initContainerStatuses"):
            for cs in status.get(key) or []:
                if isinstance(cs, dict) and cs.get("name") == container:
                    term = (cs.get("lastState") or {}).get("terminated") or {}
                    cid = term.get("containerID")
                    return str(cid) if cid else None
        return None

    # -- events ----------------------------------------------------------------------------
    def emit(self, namespace: str, event: dict[str, Any]) -> None:
        """Record an event, best effort and in order. A repeat of an event already recorded
        (same object, container, reason and message) bumps its `count` and `lastTimestamp`,
        as the kubelet's event correlator does (`kubectl describe` shows "x4 over 2m")."""
        involved = event["involvedObject"]
        key = (
            namespace,
            involved.get("uid", ""),
            involved.get("fieldPath", ""),
            event["reason"],
            event["message"],
        )

        async def send() -> None:
            try:
                seen = self._event_index.get(key)
                if seen is None:
                    await self.kube.create_event(namespace, event)
                    self._event_index[key] = (event["metadata"]["name"], 1)
                else:
                    name, count = seen
                    await self.kube.bump_event(namespace, name, count + 1, event["lastTimestamp"])
                    self._event_index[key] = (name, count + 1)
            except Exception as e:
                log.debug("event not recorded: %s", e)

        previous = self._event_tail
        task = asyncio.create_task(self._after(previous, send()))
        self._event_tail = task
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    @staticmethod
    async def _after(previous: asyncio.Task[None] | None, work: Any) -> None:
        """Run `work` once `previous` is done: events are sent one at a time, in order."""
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        await work

    # -- node ------------------------------------------------------------------------------
    async def _post_node_status(self, port: int) -> None:
        status = nodes.node_status(
            self.facts,
            port=port,
            now=rfc3339(utcnow()),
            ready_since=self._started_at,
            old=self._node_status,
        )
        await self.kube.patch_node_status(self.config.node_name, status)
        self._node_status = status

    async def _heartbeat(self) -> None:
        beats = 0
        while True:
            try:
                lease = nodes.node_lease(
                    self.config.node_name, self._node_uid, now_micro=micro_time(utcnow())
                )
                await self.kube.renew_lease(lease)
                beats += 1
                if beats % 6 == 0:  # node status every minute, lease every 10 s
                    await self._post_node_status(self.logs.port)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("heartbeat failed: %s", e)
            await asyncio.sleep(self.config.heartbeat_seconds)
