"""One pod's reconciliation: desired containers vs. the instances on disk, then status.

A `PodWorker` owns one pod uid. Each `sync()` is level-triggered: it reads the pod as last seen
from the API server and the container instances from the runtime, decides what to start or stop
(using the pure rules of `restart`, `expansion`, `volumes`; containers are started by
`starter` and stopped by `stopper`), and reports the status computed by `status.pod_status` when
it changed. It returns how long until it must look again (a back-off expiring, a grace period
running out, or the periodic resync), or None when the pod is gone and its files are removed. Syncs of one pod never overlap; different pods sync concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from kube.errors import NotFound
from localcluster.client import events
from localcluster.client.clock import event_suffix, rfc3339, utcnow
from localcluster.kubelet import (
    hooks,
    launch,
    ports,
    prober,
    restart,
    sandbox,
    starter,
    status,
    stopper,
    volumes,
)
from localcluster.kubelet.model import BackOff, ContainerView
from localcluster.kubelet.runtime import Runtime

if TYPE_CHECKING:
    from localcluster.kubelet.kubelet import Kubelet

__all__ = ["PodWorker"]

log = logging.getLogger("trainops.kubelet")

TERMINAL = ("Succeeded", "Failed")
MIN_GRACE = 2.0


class PodWorker:
    def __init__(self, kubelet: Kubelet, uid: str) -> None:
        self.kubelet = kubelet
        self.uid = uid
        self.pod: dict[str, Any] | None = None
        self.deleted = False  # gone from the API server
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.backoffs: dict[str, BackOff] = {}
        self.waiting: dict[str, tuple[str, str]] = {}  # start failures per container
        self.sent_events: set[tuple[str, ...]] = set()
        self.reported: dict[str, Any] | None = None
        self.prepared = False
        self.mount_paths: list[str] = []
        self.final_reported = False
        self.failure: tuple[str, str] | None = None  # the kubelet failed the whole pod
        self.probers: dict[tuple[str, int], asyncio.Task[None]] = {}
        # The pod's sandbox: network namespace, address, hosts file, hostname (sandbox.py).
        self.sandbox = sandbox.PodSandbox(
            uid, kubelet.runtime.pod_dir(uid), kubelet.network, kubelet.names
        )
        self.verdicts: dict[tuple[str, int], tuple[bool, bool]] = {}  # (started, ready)
        self.stopper = stopper.Stopper(
            kubelet.runtime, uid, event=self._stopper_event, poke=self.poke
        )

    # -- loop ---------------------------------------------------------------------------
    def poke(self) -> None:
        self.wake.set()

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            for task in self.probers.values():
                task.cancel()
            self.stopper.cancel()
            self.probers.clear()

    async def _run(self) -> None:
        while True:
            self.wake.clear()
            try:
                delay = await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sync of pod %s failed", self.uid)
                delay = 1.0
            if delay is None:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(delay, 0.01)):
                    await self.wake.wait()

    @property
    def runtime(self) -> Runtime:
        return self.kubelet.runtime

    async def sync(self) -> float | None:
        pod = self.pod
        shutting_down = self.kubelet.shutting_down
        if self.deleted or pod is None:
            grace = _grace(pod)
            if not await self._terminate(grace, pod):
                return 0.1
            await self.sandbox.tear_down()
            await asyncio.to_thread(self.runtime.remove_pod, self.uid)
            return None
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            grace = _grace(pod)
            if not await self._terminate(grace, pod):
                return 0.1
            if not self.final_reported:
                await self._report(pod, terminating_done=True)
                self.final_reported = True
                await self.kubelet.kube.delete_pod_now(meta["namespace"], meta["name"], self.uid)
            return 1.0  # the DELETED event ends this worker
        if shutting_down:
            grace = min(_grace(pod), max(self.kubelet.config.shutdown_grace_seconds, MIN_GRACE))
            if self.kubelet.hurry:
                grace = 0.0
            if not await self._terminate(grace, pod):
                return 0.1
            await self._report(pod, shutdown=True)
            return None
        if self.failure is None:
            self.failure = self._deadline_exceeded(pod)
        if self.failure is not None:
            if not await self._terminate(_grace(pod), pod):
                return 0.1
            await self._report(pod, failure=self.failure)
            return self.kubelet.config.resync_seconds
        return await self._sync_live(pod)

    def _deadline_exceeded(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        left = hooks.deadline_left(
            pod.get("spec") or {}, self.reported or pod.get("status") or {}, utcnow()
        )
        if left is None or left > 0:
            return None
        self.event(pod, "DeadlineExceeded", hooks.DEADLINE_MESSAGE, warning=True, key=("deadline",))
        return ("DeadlineExceeded", hooks.DEADLINE_MESSAGE)

    # -- the normal path ---------------------------------------------------------------------
    async def _sync_live(self, pod: dict[str, Any]) -> float:
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        now = utcnow()
        await asyncio.to_thread(self.runtime.record_pod, pod)
        phase = (self.reported or pod.get("status") or {}).get("phase")
        terminal = phase in TERMINAL
        delay = self.kubelet.config.resync_seconds
        if not self.prepared and not terminal:
            if self.kubelet.shares_host_network(pod):
                shared = [
                    p for p in self.kubelet.active_pods() if self.kubelet.shares_host_network(p)
                ]
                for port, message in ports.conflicts(pod, shared):
                    self.event(pod, "PortConflict", message, warning=True, key=("port", port))
            error = await self._prepare(pod)
            if error:
                reason, message = error
                self.event(pod, reason, message, warning=True, key=("prepare", reason, message))
                delay = min(delay, 2.0)

        init_views: list[ContainerView] = []
        views: list[ContainerView] = []
        blocked = not self.prepared or terminal
        # Sidecars (init containers with restartPolicy Always) stop being restarted, and are
        # stopped, once every regular container has ended for good.
        completing = await self._completing(spec, policy)
        for c in spec.get("initContainers") or []:
            sidecar = c.get("restartPolicy") == "Always"
            view, done, wait = await self._advance(
                pod, c, policy, now, init=True, hold=blocked or (sidecar and completing)
            )
            init_views.append(view)
            if wait is not None:
                delay = min(delay, wait)
            if not done:
                blocked = True
        for c in spec.get("containers") or []:
            view, _, wait = await self._advance(pod, c, policy, now, init=False, hold=blocked)
            views.append(view)
            if wait is not None:
                delay = min(delay, wait)
        if completing:
            grace = _grace(pod)
            for c in reversed(spec.get("initContainers") or []):
                insts = await asyncio.to_thread(self.runtime.instances, self.uid, c["name"])
                if insts and insts[-1].running:
                    self.stopper.stop_instance(c["name"], insts[-1].attempt, grace)
        await self._report(pod, init_views, views)
        left = hooks.deadline_left(spec, self.reported or {}, utcnow())
        if left is not None:
            delay = min(delay, max(left, 0.05))
        return delay

    async def _completing(self, spec: dict[str, Any], policy: str) -> bool:
        """Every regular container has ended and will not be restarted (never under Always)."""
        if policy == "Always" or not spec.get("containers"):
            return False
        for c in spec["containers"]:
            insts = await asyncio.to_thread(self.runtime.instances, self.uid, c["name"])
            last = insts[-1] if insts else None
            if last is None or last.running:
                return False
            if restart.should_restart(policy, last.exit_code or 0):
                return False
        return True

    async def _prepare(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        """Create the pod's root, volumes and network; an error (event reason, message) keeps
        the pod waiting."""
        cms, secrets = await self.fetch(pod)
        tokens = await self._tokens(pod)
        plan = volumes.plan_volumes(pod, config_maps=cms, secrets=secrets, tokens=tokens)
        if isinstance(plan, str):
            return ("FailedMount", plan)
        pod_dir = self.runtime.pod_dir(self.uid)
        await asyncio.to_thread(
            volumes.materialise, plan, pod_dir=pod_dir, data_dir=self.runtime.data_dir
        )
        self.mount_paths = [link.mount_path for link in plan.links]
        shared = self.kubelet.shares_host_network(pod)
        # A pod that asked for the host's network gets what it asked for: nothing to warn of.
        asked = bool((pod.get("spec") or {}).get("hostNetwork"))
        if shared and not asked and not self.kubelet.network.enabled:
            message = self.kubelet.network.decision.event()
            self.event(pod, "HostNetwork", message, warning=True, key=("hostnetwork",))
        error = await self.sandbox.set_up(pod, host_network=shared)
        if error:
            return ("FailedCreatePodSandBox", error)
        self.stopper.host, self.stopper.enter = self.sandbox.ip, self.sandbox.enter()
        self.prepared = True
        return None

    async def _tokens(self, pod: dict[str, Any]) -> dict[str, str]:
        """Tokens for the pod's projected serviceAccountToken sources, by TokenRequest bound to
        the pod, as a kubelet asks for them (not refreshed: each lives `expirationSeconds`)."""
        meta = pod["metadata"]
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        tokens = {}
        for key, audience, seconds in volumes.token_requests(pod):
            token = await self.kubelet.kube.request_token(
                meta.get("namespace", "default"),
                account,
                audience=audience,
                expiration_seconds=seconds,
                pod=(meta["name"], meta.get("uid", "")),
            )
            if token is not None:
                tokens[key] = token
        return tokens

    async def fetch(
        self, pod: dict[str, Any], container: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ConfigMaps and Secrets the pod's volumes (or one container's env) read."""
        ns = pod["metadata"].get("namespace", "default")
        cm_names, secret_names = launch.references(pod, container)
        kube = self.kubelet.kube
        cms = {n: o for n in cm_names if (o := await kube.get_config_map(ns, n)) is not None}
        secrets = {n: o for n in secret_names if (o := await kube.get_secret(ns, n)) is not None}
        return cms, secrets

    async def _advance(
        self,
        pod: dict[str, Any],
        c: dict[str, Any],
        policy: str,
        now: Any,
        *,
        init: bool,
        hold: bool,
    ) -> tuple[ContainerView, bool, float | None]:
        """Move one container forward; returns its view, whether it is done (init containers:
        succeeded) and when to look again."""
        name = c["name"]
        sidecar = init and c.get("restartPolicy") == "Always"
        insts = await asyncio.to_thread(self.runtime.instances, self.uid, name)
        last = insts[-1] if insts else None
        wait: float | None = None
        waiting = ("", "")
        if hold:
            pass
        elif last is None:
            waiting, wait = await starter.start_container(self, pod, c, 0, now)
        elif not last.running:
            if sidecar:
                wanted = True  # restartable init container: restarted whatever the pod policy
            elif init:
                wanted = restart.should_restart_init(policy, last.exit_code or 0)
            else:
                wanted = restart.should_restart(policy, last.exit_code or 0)
            if wanted:
                waiting, wait = await starter.restart_container(self, pod, c, last, now)
        insts = await asyncio.to_thread(self.runtime.instances, self.uid, name)
        last = insts[-1] if insts else None
        started: bool | None = None
        ready: bool | None = None
        if last is not None and last.running:
            waiting = ("", "")
            self.waiting.pop(name, None)
            started, ready = self._probe(pod, c, last.attempt, init=init and not sidecar)
        for key in [
            k
            for k in self.probers
            if k[0] == name and (last is None or k[1] != last.attempt or not last.running)
        ]:
            self.probers.pop(key).cancel()
            self.verdicts.pop(key, None)
        view = ContainerView(
            name, str(c.get("image") or ""), tuple(insts[-2:]), *waiting, started, ready
        )
        if sidecar:  # a sidecar lets initialization go on once it has started
            done = last is not None and last.running and started is not False
        else:
            done = last is not None and last.succeeded
        return view, done, wait

    # -- probes --------------------------------------------------------------------------
    def _probe(
        self, pod: dict[str, Any], c: dict[str, Any], attempt: int, *, init: bool
    ) -> tuple[bool | None, bool | None]:
        """(started, ready) verdicts of a running instance; starts its prober when needed."""
        kinds = [k for k in prober.KINDS if c.get(k)]
        if init or not kinds:
            return None, None
        key = (c["name"], attempt)
        if key not in self.probers:
            self.verdicts[key] = ("startupProbe" not in kinds, False)
            self.probers[key] = asyncio.create_task(self._prober(pod, c, attempt))
        started, ready = self.verdicts[key]
        return (started if "startupProbe" in kinds else None), (
            ready if "readinessProbe" in kinds else started
        )

    async def _prober(self, pod: dict[str, Any], c: dict[str, Any], attempt: int) -> None:
        name = c["name"]
        key = (name, attempt)
        spec = await asyncio.to_thread(self.runtime.start_spec, self.uid, name, attempt) or {}

        def report(started: bool, ready: bool) -> None:
            self.verdicts[key] = (started, ready)
            self.poke()

        def event(reason: str, message: str, warning: bool) -> None:
            self.event(
                pod,
                reason,
                message,
                warning=warning,
                container=name,
                key=(reason, name, str(attempt), message, str(time.monotonic())),
            )

        await prober.probe_instance(
            c,
            env=spec.get("env") or {},
            cwd=spec.get("cwd") or str(self.runtime.pod_dir(self.uid) / "root"),
            report=report,
            event=event,
            kill=lambda: self.stopper.kill_instance(name, attempt, _grace(pod)),
            host=self.sandbox.ip or "127.0.0.1",
            enter=self.sandbox.enter(),
        )

    async def _terminate(self, grace: float, pod: dict[str, Any] | None) -> bool:
        for task in self.probers.values():
            task.cancel()
        return await self.stopper.terminate(grace, pod)

    # -- reporting -----------------------------------------------------------------------
    async def _report(
        self,
        pod: dict[str, Any],
        init_views: list[ContainerView] | None = None,
        views: list[ContainerView] | None = None,
        *,
        terminating_done: bool = False,
        failure: tuple[str, str] | None = None,
        shutdown: bool = False,
    ) -> None:
        spec = pod.get("spec") or {}
        if init_views is None or views is None:
            init_views, views = [], []
            for c in spec.get("initContainers") or []:
                insts = await asyncio.to_thread(self.runtime.instances, self.uid, c["name"])
                init_views.append(
                    ContainerView(c["name"], str(c.get("image") or ""), tuple(insts[-2:]))
                )
            for c in spec.get("containers") or []:
                insts = await asyncio.to_thread(self.runtime.instances, self.uid, c["name"])
                views.append(ContainerView(c["name"], str(c.get("image") or ""), tuple(insts[-2:])))
        base = dict(pod)
        if self.reported is not None:
            base["status"] = self.reported
        new = status.pod_status(
            base,
            init_views,
            views,
            now=rfc3339(utcnow()),
            sandbox_ready=self.prepared,
            pod_ip=self.sandbox.ip,
            terminating_done=terminating_done,
            failure=failure,
            shutdown=shutdown,
        )
        if new == self.reported:
            return
        meta = pod["metadata"]
        try:
            await self.kubelet.kube.patch_pod_status(meta["namespace"], meta["name"], new)
        except NotFound:
            return
        self.reported = new
        self.sandbox.reported(pod, new)  # other pods' hosts files name this one

    def _stopper_event(
        self,
        pod: dict[str, Any],
        reason: str,
        message: str,
        warning: bool,
        container: str,
        key: tuple[str, ...],
    ) -> None:
        self.event(pod, reason, message, warning=warning, container=container, key=key)

    def event(
        self,
        pod: dict[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        container: str = "",
        key: tuple[str, ...],
    ) -> None:
        """Emit a pod event once per `key` (best effort, never blocks the sync)."""
        if key in self.sent_events:
            return
        self.sent_events.add(key)
        node = self.kubelet.config.node_name
        event = events.pod_event(
            pod,
            reason,
            message,
            now=rfc3339(utcnow()),
            suffix=event_suffix(),
            host=node,
            warning=warning,
            container=container,
        )
        self.kubelet.emit(pod["metadata"].get("namespace", "default"), event)


def _grace(pod: dict[str, Any] | None) -> float:
    """Seconds between SIGTERM and SIGKILL: the deletion's grace period if the pod is being
    deleted, else `terminationGracePeriodSeconds` (30), never under 2 s (the kubelet's minimum,
    which also applies to force deletions)."""
    meta = (pod or {}).get("metadata") or {}
    spec = (pod or {}).get("spec") or {}
    value = meta.get("deletionGracePeriodSeconds")
    if value is None:
        value = spec.get("terminationGracePeriodSeconds")
    return max(float(value) if value is not None else 30.0, MIN_GRACE)
