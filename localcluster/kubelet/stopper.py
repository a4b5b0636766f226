"""Stopping a pod's containers: preStop hooks, SIGTERM, SIGKILL after the grace period.

One `Stopper` per pod worker. `terminate()` is called on every sync while a pod is being
stopped (deleted, failed by the kubelet, or the kubelet shutting down); it is idempotent and
returns True once nothing runs. `kill_instance()` stops a single instance (liveness failure,
sidecars at the end of a pod) in its own task.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

from localcluster.kubelet import hooks
from localcluster.kubelet.runtime import Runtime

__all__ = ["EventFn", "Stopper"]

# (pod, reason, message, warning, container, dedup key) -> None
EventFn = Callable[[dict[str, Any], str, str, bool, str, tuple[str, ...]], None]


class Stopper:
    def __init__(
        self, runtime: Runtime, uid: str, *, event: EventFn, poke: Callable[[], None]
    ) -> None:
        self.runtime = runtime
        self.uid = uid
        self.event = event
        self.poke = poke
        self.started: float | None = None  # when the pod-wide stop began
        self.signalled: set[tuple[str, int, int]] = set()
        self.hooks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.single: dict[tuple[str, int], asyncio.Task[None]] = {}
        # Where preStop handlers reach the pod: its IP, and the exec prefix entering it.
        self.host = "127.0.0.1"
        self.enter: tuple[str, ...] = ()

    def cancel(self) -> None:
        for task in [*self.hooks.values(), *self.single.values()]:
            task.cancel()

    async def terminate(self, grace: float, pod: dict[str, Any] | None) -> bool:
        """Stop every running instance: its `preStop` hook first (if any), then SIGTERM, and
        SIGKILL once `grace` has passed since the stop began; True when none runs any more."""
        running = await asyncio.to_thread(self.runtime.running_instances, self.uid)
        if not running:
            for task in self.hooks.values():
                task.cancel()
            return True
        if self.started is None:
            self.started = time.monotonic()
            if pod is not None:
                for name, attempt in running:
                    self.event(
                        pod, "Killing", f"Stopping container {name}", False, name, ("kill", name)
                    )
                    self._pre_stop(pod, name, attempt, grace)
        elapsed = time.monotonic() - self.started
        for name, attempt in running:
            hook = self.hooks.get((name, attempt))
            if elapsed < grace and hook is not None and not hook.done():
                continue  # SIGTERM waits for the preStop hook, within the grace period
            sig = signal.SIGTERM if elapsed < grace else signal.SIGKILL
            key = (name, attempt, int(sig))
            if key not in self.signalled and await self.runtime.signal(
                self.uid, name, attempt, sig
            ):
                self.signalled.add(key)
        return False

    def stop_instance(self, name: str, attempt: int, grace: float) -> None:
        """Stop one instance in the background (once per instance)."""
        key = (name, attempt)
        if key not in self.single:
            self.single[key] = asyncio.create_task(self.kill_instance(name, attempt, grace))

    async def kill_instance(self, name: str, attempt: int, grace: float) -> None:
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

    def _pre_stop(self, pod: dict[str, Any], name: str, attempt: int, grace: float) -> None:
        """Run the container's `lifecycle.preStop` handler (exec, httpGet, sleep) in a task."""
        spec = pod.get("spec") or {}
        container = next(
            (
                c
                for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
                if c.get("name") == name
            ),
            None,
        )
        handler = ((container or {}).get("lifecycle") or {}).get("preStop")
        if not handler or container is None:
            return

        async def run() -> None:
            record = await asyncio.to_thread(self.runtime.start_spec, self.uid, name, attempt)
            ok, message = await hooks.run_pre_stop(
                handler,
                container=container,
                env=(record or {}).get("env") or {},
                cwd=(record or {}).get("cwd") or str(self.runtime.pod_dir(self.uid) / "root"),
                grace=grace,
                host=self.host,
                enter=self.enter,
            )
            if not ok:
                self.event(
                    pod,
                    "FailedPreStopHook",
                    f"PreStopHook failed: {message}",
                    True,
                    name,
                    ("prestop", name, str(attempt)),
                )
            self.poke()

        self.hooks[(name, attempt)] = asyncio.create_task(run())
