"""One pod's reconciliation: desired containers vs. the instances on disk, then status.

A `PodWorker` owns one pod uid. Each `sync()` is level-triggered: it reads the pod as last seen
from the API server and the container instances from the runtime, decides what to start or stop
(using the pure rules of `restart`, `expansion`, `volumes`), and reports the status computed by
`status.pod_status` when it changed. It returns how long until it must look again (a back-off
expiring, a grace period running out, or the periodic resync), or None when the pod is gone and
its files are removed. Syncs of one pod never overlap; different pods sync concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localcluster.kubelet import expansion, probes, restart, status, volumes
from localcluster.kubelet.clock import rfc3339, utcnow
from localcluster.kubelet.kube import ApiException
from localcluster.kubelet.logs import parse_time
from localcluster.kubelet.model import BackOff, ContainerView, Instance
from localcluster.kubelet.runtime import Runtime, StartSpec

if TYPE_CHECKING:
    from localcluster.kubelet.kubelet import Kubelet

__all__ = ["PodWorker"]

log = logging.getLogger("trainops.kubelet")

TERMINAL = ("Succeeded", "Failed")
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TZ")
PULLED_MESSAGE = 'Container image "{image}" is not pulled: containers run as local processes'
NO_COMMAND = (
    "container has neither command nor args: the image's entrypoint is unknown to the local "
    "kubelet (images are not pulled); set command or args"
)


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
        self.term_started: float | None = None
        self.signalled: set[tuple[str, int, int]] = set()
        self.prepared = False
        self.mount_paths: list[str] = []
        self.final_reported = False
        self.failure: tuple[str, str] | None = None  # the kubelet failed the whole pod
        self.probers: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.verdicts: dict[tuple[str, int], tuple[bool, bool]] = {}  # (started, ready)

    # -- loop ---------------------------------------------------------------------------
    def poke(self) -> None:
        self.wake.set()

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            for task in self.probers.values():
                task.cancel()
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
            grace = _grace(pod) if pod else 2.0
            if not await self._terminate(grace, pod):
                return 0.1
            await asyncio.to_thread(self.runtime.remove_pod, self.uid)
            return None
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            grace = float(meta.get("deletionGracePeriodSeconds", _grace(pod)))
            if not await self._terminate(grace, pod):
                return 0.1
            if not self.final_reported:
                await self._report(pod, terminating_done=True)
                self.final_reported = True
                await self.kubelet.kube.delete_pod_now(meta["namespace"], meta["name"], self.uid)
            return 1.0  # the DELETED event ends this worker
        if shutting_down:
            grace = min(_grace(pod), self.kubelet.config.shutdown_grace_seconds)
            if not await self._terminate(grace, pod):
                return 0.1
            await self._report(pod)
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
        """`spec.activeDeadlineSeconds` counted from the pod's `startTime`, as the kubelet does."""
        deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
        status = self.reported or pod.get("status") or {}
        if deadline is None or not status.get("startTime") or status.get("phase") in TERMINAL:
            return None
        elapsed = (utcnow() - parse_time(status["startTime"])).total_seconds()
        if elapsed < float(deadline):
            return None
        message = "Pod was active on the node longer than the specified deadline"
        self._event(pod, "DeadlineExceeded", message, warning=True, key=("deadline",))
        return ("DeadlineExceeded", message)

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
            error = await self._prepare(pod)
            if error:
                self._event(pod, "FailedMount", error, warning=True, key=("mount", error))
                delay = min(delay, 2.0)

        init_views: list[ContainerView] = []
        views: list[ContainerView] = []
        blocked = not self.prepared or terminal
        for c in spec.get("initContainers") or []:
            view, done, wait = await self._advance(pod, c, policy, now, init=True, hold=blocked)
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
        await self._report(pod, init_views, views)
        deadline = spec.get("activeDeadlineSeconds")
        start = (self.reported or {}).get("startTime")
        if deadline is not None and start and (self.reported or {}).get("phase") not in TERMINAL:
            left = float(deadline) - (utcnow() - parse_time(start)).total_seconds()
            delay = min(delay, max(left, 0.05))
        return delay

    async def _prepare(self, pod: dict[str, Any]) -> str | None:
        ns = pod["metadata"].get("namespace", "default")
        cms, secrets = await self._references(pod, volumes_only=True)
        plan = volumes.plan_volumes(pod, config_maps=cms, secrets=secrets)
        if isinstance(plan, str):
            return plan
        pod_dir = self.runtime.pod_dir(self.uid)
        await asyncio.to_thread(
            volumes.materialise, plan, pod_dir=pod_dir, data_dir=self.runtime.data_dir
        )
        self.mount_paths = [link.mount_path for link in plan.links]
        self.prepared = True
        del ns
        return None

    async def _references(
        self,
        pod: dict[str, Any],
        container: dict[str, Any] | None = None,
        *,
        volumes_only: bool = False,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Fetch the ConfigMaps and Secrets the pod's volumes or one container's env name."""
        ns = pod["metadata"].get("namespace", "default")
        cm_names: set[str] = set()
        secret_names: set[str] = set()
        if volumes_only:
            for v in (pod.get("spec") or {}).get("volumes") or []:
                if "configMap" in v:
                    cm_names.add(str((v["configMap"] or {}).get("name") or ""))
                if "secret" in v:
                    secret_names.add(str((v["secret"] or {}).get("secretName") or ""))
        else:
            assert container is not None
            for src in container.get("envFrom") or []:
                if "configMapRef" in src:
                    cm_names.add(str((src["configMapRef"] or {}).get("name") or ""))
                if "secretRef" in src:
                    secret_names.add(str((src["secretRef"] or {}).get("name") or ""))
            for e in container.get("env") or []:
                vf = e.get("valueFrom") or {}
                if "configMapKeyRef" in vf:
                    cm_names.add(str((vf["configMapKeyRef"] or {}).get("name") or ""))
                if "secretKeyRef" in vf:
                    secret_names.add(str((vf["secretKeyRef"] or {}).get("name") or ""))
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
        insts = await asyncio.to_thread(self.runtime.instances, self.uid, name)
        last = insts[-1] if insts else None
        wait: float | None = None
        waiting = ("", "")
        if hold:
            pass
        elif last is None:
            waiting, wait = await self._start(pod, c, 0, now)
        elif not last.running:
            wanted = (
                restart.should_restart_init(policy, last.exit_code or 0)
                if init
                else restart.should_restart(policy, last.exit_code or 0)
            )
            if wanted:
                waiting, wait = await self._restart(pod, c, last, now)
        insts = await asyncio.to_thread(self.runtime.instances, self.uid, name)
        last = insts[-1] if insts else None
        started: bool | None = None
        ready: bool | None = None
        if last is not None and last.running:
            waiting = ("", "")
            self.waiting.pop(name, None)
            started, ready = self._probe(pod, c, last.attempt, init=init)
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
        done = last is not None and last.succeeded
        return view, done, wait

    async def _restart(
        self, pod: dict[str, Any], c: dict[str, Any], last: Instance, now: Any
    ) -> tuple[tuple[str, str], float | None]:
        name = c["name"]
        policy_cfg = self.kubelet.config.backoff
        finished = parse_time(last.finished_at or last.started_at)
        entry = self.backoffs.get(name)
        remaining = (
            restart.restart_delay(entry, finished, policy_cfg) - (now - finished).total_seconds()
        )
        if remaining > 0:
            assert entry is not None
            meta = pod["metadata"]
            message = (
                f"back-off {restart.go_duration(entry.period)} restarting failed container={name}"
                f" pod={meta['name']}_{meta.get('namespace')}({self.uid})"
            )
            self._event(
                pod,
                "BackOff",
                f"Back-off restarting failed container {name} in pod "
                f"{meta['name']}_{meta.get('namespace')}({self.uid})",
                warning=True,
                container=name,
                key=("backoff", name, str(last.attempt)),
            )
            return ("CrashLoopBackOff", message), remaining
        self.backoffs[name] = restart.backoff_after_restart(entry, finished, policy_cfg)
        return await self._start(pod, c, last.attempt + 1, now)

    async def _start(
        self, pod: dict[str, Any], c: dict[str, Any], attempt: int, now: Any
    ) -> tuple[tuple[str, str], float | None]:
        name = c["name"]
        meta = pod["metadata"]
        cms, secrets = await self._references(pod, c)
        env_result = expansion.resolve_env(
            pod, c, config_maps=cms, secrets=secrets, node=self.kubelet.node_facts
        )
        if isinstance(env_result, expansion.EnvError):
            self._event(
                pod,
                "Failed",
                f"Error: {env_result.message}",
                warning=True,
                container=name,
                key=("env", name, env_result.message),
            )
            return (env_result.reason, env_result.message), 2.0
        env, warnings = env_result
        for w in warnings:
            self._event(
                pod, "InvalidEnvironmentVariableNames", w, warning=True, key=("envnames", w)
            )
        command, args = expansion.expand_command(c, env)
        argv = command + args
        if not argv:
            self._event(
                pod,
                "Failed",
                f"Error: {NO_COMMAND}",
                warning=True,
                container=name,
                key=("nocmd", name),
            )
            return ("CreateContainerError", NO_COMMAND), None
        root = str(self.runtime.pod_dir(self.uid) / "root")
        argv = [volumes.rewrite_path(a, root, self.mount_paths) for a in argv]
        workdir = str(c.get("workingDir") or "")
        cwd = Path(root) / workdir.lstrip("/") if workdir else Path(root)
        await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
        proc_env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        proc_env.update(
            {
                "HOSTNAME": meta["name"],
                "TRAINOPS_POD_ROOT": root,
                "TMPDIR": root + "/tmp",
            }
        )
        proc_env.update(env)
        self._event(
            pod,
            "Pulled",
            PULLED_MESSAGE.format(image=c.get("image", "")),
            container=name,
            key=("pulled", name),
        )
        self._event(
            pod,
            "Created",
            f"Created container: {name}",
            container=name,
            key=("created", name, str(attempt)),
        )
        spec = StartSpec(self.uid, name, attempt, argv, proc_env, str(cwd))
        await self.runtime.start(spec, now=rfc3339(now))
        self._event(
            pod,
            "Started",
            f"Started container {name}",
            container=name,
            key=("started", name, str(attempt)),
        )
        self.waiting.pop(name, None)
        return ("", ""), None

    # -- probes --------------------------------------------------------------------------
    def _probe(
        self, pod: dict[str, Any], c: dict[str, Any], attempt: int, *, init: bool
    ) -> tuple[bool | None, bool | None]:
        """(started, ready) verdicts of a running instance; starts its prober when needed."""
        kinds = [k for k in ("startupProbe", "readinessProbe", "livenessProbe") if c.get(k)]
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
        """Probe one running instance until it ends (or a liveness/startup failure kills it)."""
        name = c["name"]
        key = (name, attempt)
        spec = await asyncio.to_thread(self.runtime.start_spec, self.uid, name, attempt) or {}
        static_env = {
            str(e.get("name")): str(e.get("value") or "")
            for e in c.get("env") or []
            if "valueFrom" not in e
        }
        kinds = {k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if c.get(k)}
        timings = {k: probes.timing(p) for k, p in kinds.items()}
        states = {k: probes.ProbeState(ok=(k == "livenessProbe")) for k in kinds}
        started = "startupProbe" not in kinds
        begin = time.monotonic()
        due = {k: begin + t.initial_delay for k, t in timings.items()}
        while True:
            now = time.monotonic()
            active = [k for k in kinds if (k == "startupProbe") != started]
            for kind in [k for k in active if due[k] <= now]:
                ok, message = await probes.run_probe(
                    kinds[kind],
                    container=c,
                    env=spec.get("env") or {},
                    static_env=static_env,
                    cwd=spec.get("cwd") or str(self.runtime.pod_dir(self.uid) / "root"),
                )
                due[kind] = time.monotonic() + timings[kind].period
                state = probes.observe(states[kind], ok, timings[kind])
                states[kind] = state
                label = kind.removesuffix("Probe").capitalize()
                if not ok and state.failures == 1:
                    self._event(
                        pod,
                        "Unhealthy",
                        f"{label} probe failed: {message}",
                        warning=True,
                        container=name,
                        key=("unhealthy", name, str(attempt), kind, str(time.monotonic())),
                    )
                if kind == "startupProbe" and state.ok:
                    started = True
                    now_started = time.monotonic()
                    for k in kinds:
                        if k != "startupProbe":
                            due[k] = now_started + timings[k].initial_delay
                failed_start = (
                    kind == "startupProbe" and state.failures >= timings[kind].failure_threshold
                )
                if (kind == "livenessProbe" and not state.ok) or failed_start:
                    self._event(
                        pod,
                        "Killing",
                        f"Container {name} failed {label.lower()} probe, will be restarted",
                        container=name,
                        key=("probekill", name, str(attempt)),
                    )
                    await self._kill_instance(name, attempt, _grace(pod))
                    return
            ready = (
                started and states["readinessProbe"].ok if "readinessProbe" in kinds else started
            )
            if self.verdicts.get(key) != (started, ready):
                self.verdicts[key] = (started, ready)
                self.poke()
            active = [k for k in kinds if (k == "startupProbe") != started]
            wait = min((due[k] for k in active), default=time.monotonic() + 1.0) - time.monotonic()
            await asyncio.sleep(max(wait, 0.02))

    async def _kill_instance(self, name: str, attempt: int, grace: float) -> None:
        deadline = time.monotonic() + grace
        termed = False
        while (name, attempt) in await asyncio.to_thread(self.runtime.running_instances, self.uid):
            # The process may not be recorded yet right after its start: retry until signalled.
            if not termed:
                termed = await self.runtime.signal(self.uid, name, attempt, signal.SIGTERM)
            if time.monotonic() >= deadline:
                await self.runtime.signal(self.uid, name, attempt, signal.SIGKILL)
            await asyncio.sleep(0.1)
        self.poke()

    # -- stopping ------------------------------------------------------------------------
    async def _terminate(self, grace: float, pod: dict[str, Any] | None) -> bool:
        """Signal every running instance (SIGTERM, then SIGKILL after `grace`); True when none
        runs any more."""
        for task in self.probers.values():
            task.cancel()
        running = await asyncio.to_thread(self.runtime.running_instances, self.uid)
        if not running:
            return True
        if self.term_started is None:
            self.term_started = time.monotonic()
            if pod is not None:
                for name, _ in running:
                    self._event(
                        pod,
                        "Killing",
                        f"Stopping container {name}",
                        container=name,
                        key=("kill", name),
                    )
        elapsed = time.monotonic() - self.term_started
        sig = signal.SIGTERM if elapsed < grace else signal.SIGKILL
        for name, attempt in running:
            key = (name, attempt, int(sig))
            if key not in self.signalled and await self.runtime.signal(
                self.uid, name, attempt, sig
            ):
                self.signalled.add(key)
        return False

    # -- reporting -----------------------------------------------------------------------
    async def _report(
        self,
        pod: dict[str, Any],
        init_views: list[ContainerView] | None = None,
        views: list[ContainerView] | None = None,
        *,
        terminating_done: bool = False,
        failure: tuple[str, str] | None = None,
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
            terminating_done=terminating_done,
            failure=failure,
        )
        if new == self.reported:
            return
        meta = pod["metadata"]
        try:
            await self.kubelet.kube.patch_pod_status(meta["namespace"], meta["name"], new)
        except ApiException as e:
            if e.status != 404:
                raise
            return
        self.reported = new

    def _event(
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
        meta = pod["metadata"]
        now = rfc3339(utcnow())
        involved: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta.get("namespace", "default"),
            "uid": meta.get("uid", ""),
        }
        if meta.get("resourceVersion"):
            involved["resourceVersion"] = meta["resourceVersion"]
        if container:
            involved["fieldPath"] = f"spec.containers{{{container}}}"
        node = self.kubelet.config.node_name
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": meta.get("namespace", "default"),
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": node,
        }
        self.kubelet.emit(meta.get("namespace", "default"), event)


def _grace(pod: dict[str, Any] | None) -> float:
    spec = (pod or {}).get("spec") or {}
    value = spec.get("terminationGracePeriodSeconds")
    return float(value) if value is not None else 30.0
