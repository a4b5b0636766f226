"""The probe loop of one running container instance (startup, then readiness and liveness).

It reports (started, ready) verdicts through `report` whenever they change, records `Unhealthy`
events, and on a liveness failure (or a startup probe reaching its failure threshold) records
`Killing` and calls `kill`, after which it ends: the pod worker sees the exit and applies the
restart policy. Thresholds are the pure `probes.observe`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from localcluster.kubelet import probes

__all__ = ["KINDS", "probe_instance"]

KINDS = ("startupProbe", "readinessProbe", "livenessProbe")


async def probe_instance(
    container: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    cwd: str,
    report: Callable[[bool, bool], None],
    event: Callable[[str, str, bool], None],
    kill: Callable[[], Awaitable[None]],
    host: str = "127.0.0.1",
    enter: Sequence[str] = (),
) -> None:
    name = container["name"]
    static_env = {
        str(e.get("name")): str(e.get("value") or "")
        for e in container.get("env") or []
        if "valueFrom" not in e
    }
    kinds = {k: container[k] for k in KINDS if container.get(k)}
    timings = {k: probes.timing(p) for k, p in kinds.items()}
    states = {k: probes.ProbeState(ok=(k == "livenessProbe")) for k in kinds}
    started = "startupProbe" not in kinds
    verdict: tuple[bool, bool] | None = None
    begin = time.monotonic()
    due = {k: begin + t.initial_delay for k, t in timings.items()}
    while True:
        active = [k for k in kinds if (k == "startupProbe") != started]
        for kind in [k for k in active if due[k] <= time.monotonic()]:
            ok, message = await probes.run_probe(
                kinds[kind],
                container=container,
                env=env,
                static_env=static_env,
                cwd=cwd,
                host=host,
                enter=enter,
            )
            due[kind] = time.monotonic() + timings[kind].period
            state = probes.observe(states[kind], ok, timings[kind])
            states[kind] = state
            label = kind.removesuffix("Probe").capitalize()
            if not ok and state.failures == 1:
                event("Unhealthy", f"{label} probe failed: {message}", True)
            if kind == "startupProbe" and state.ok:
                started = True
                for k in kinds:
                    if k != "startupProbe":
                        due[k] = time.monotonic() + timings[k].initial_delay
            failed_start = (
                kind == "startupProbe" and state.failures >= timings[kind].failure_threshold
            )
            if (kind == "livenessProbe" and not state.ok) or failed_start:
                event(
                    "Killing",
                    f"Container {name} failed {label.lower()} probe, will be restarted",
                    False,
                )
                await kill()
                return
        ready = started and (states["readinessProbe"].ok if "readinessProbe" in kinds else True)
        if verdict != (started, ready):
            verdict = (started, ready)
            report(started, ready)
        active = [k for k in kinds if (k == "startupProbe") != started]
        wait = min((due[k] for k in active), default=time.monotonic() + 1.0) - time.monotonic()
        await asyncio.sleep(max(wait, 0.02))
