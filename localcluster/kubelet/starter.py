"""Starting a pod's containers, for `podworker.PodWorker` (the counterpart of `stopper`): a
restart once the crash-loop back-off has run out (`restart`), the launch plan (`launch`, with the
environment's image `images`), the Pulled, Created, Started and Failed events, and the instance
started by the runtime. Functions over the worker, whose state (back-offs, mount paths, the
sandbox) they read and update.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localcluster.client.clock import rfc3339
from localcluster.kubelet import images, launch, restart
from localcluster.kubelet.logs import parse_time
from localcluster.kubelet.model import Instance
from localcluster.kubelet.runtime import StartSpec, exec_problem

if TYPE_CHECKING:
    from localcluster.kubelet.podworker import PodWorker

__all__ = ["restart_container", "start_container"]


async def restart_container(
    worker: PodWorker, pod: dict[str, Any], c: dict[str, Any], last: Instance, now: Any
) -> tuple[tuple[str, str], float | None]:
    """Start container `c` again after `last` ended, once its crash-loop back-off has run out;
    until then its waiting reason (CrashLoopBackOff) and the seconds left."""
    name = c["name"]
    policy_cfg = worker.kubelet.config.backoff
    finished = parse_time(last.finished_at or last.started_at)
    entry = worker.backoffs.get(name)
    remaining = (
        restart.restart_delay(entry, finished, policy_cfg) - (now - finished).total_seconds()
    )
    if remaining > 0:
        assert entry is not None
        meta = pod["metadata"]
        message = (
            f"back-off {restart.go_duration(entry.period)} restarting failed container={name}"
            f" pod={meta['name']}_{meta.get('namespace')}({worker.uid})"
        )
        worker.event(
            pod,
            "BackOff",
            f"Back-off restarting failed container {name} in pod "
            f"{meta['name']}_{meta.get('namespace')}({worker.uid})",
            warning=True,
            container=name,
            key=("backoff", name, str(last.attempt)),
        )
        return ("CrashLoopBackOff", message), remaining
    worker.backoffs[name] = restart.backoff_after_restart(entry, finished, policy_cfg)
    result = await start_container(worker, pod, c, last.attempt + 1, now)
    # Only now: until the new instance exists, `last` is the one `previous` must not lose.
    await asyncio.to_thread(worker.runtime.prune, worker.uid, name, last.attempt)
    return result


async def start_container(
    worker: PodWorker, pod: dict[str, Any], c: dict[str, Any], attempt: int, now: Any
) -> tuple[tuple[str, str], float | None]:
    """Start instance `attempt` of container `c`; its waiting reason and message when it
    cannot be (and when to try again), else ("", "")."""
    name = c["name"]
    image = str(c.get("image") or "")
    env_image = images.match(image, worker.kubelet.config.images)
    cms, secrets = await worker.fetch(pod, c)
    plan = launch.plan_launch(
        pod,
        c,
        config_maps=cms,
        secrets=secrets,
        node=dataclasses.replace(
            worker.kubelet.node_facts, pod_ip=worker.sandbox.ip or "127.0.0.1"
        ),
        root=str(worker.runtime.pod_dir(worker.uid) / "root"),
        mount_paths=worker.mount_paths,
        inherited_env=images.environment(worker.kubelet.inherited_env, env_image),
    )
    if isinstance(plan, launch.LaunchError):
        worker.event(
            pod,
            "Failed",
            f"Error: {plan.message}",
            warning=True,
            container=name,
            key=("launch", name, plan.message),
        )
        retry = 2.0 if plan.reason == "CreateContainerConfigError" else None
        return (plan.reason, plan.message), retry
    for w in plan.warnings:
        worker.event(pod, "InvalidEnvironmentVariableNames", w, warning=True, key=("envnames", w))
    await asyncio.to_thread(Path(plan.cwd).mkdir, parents=True, exist_ok=True)
    worker.event(
        pod,
        "Pulled",
        images.pulled_message(image, env_image),
        container=name,
        key=("pulled", name),
    )
    worker.event(
        pod,
        "Created",
        f"Created container: {name}",
        container=name,
        key=("created", name, str(attempt)),
    )
    spec = StartSpec(
        worker.uid,
        name,
        attempt,
        plan.argv,
        plan.env,
        plan.cwd,
        plan.termination_path,
        plan.termination_policy,
        worker.sandbox.spec(pod),
    )
    problem = await asyncio.to_thread(exec_problem, spec)
    await worker.runtime.start(spec, now=rfc3339(now))  # a failed exec is recorded there too
    if problem:
        worker.event(
            pod,
            "Failed",
            f'Error: failed to start container "{name}": {problem}',
            warning=True,
            container=name,
            key=("startfailed", name, str(attempt)),
        )
        worker.waiting.pop(name, None)
        return ("", ""), None
    worker.event(
        pod,
        "Started",
        f"Started container {name}",
        container=name,
        key=("started", name, str(attempt)),
    )
    worker.waiting.pop(name, None)
    return ("", ""), None
