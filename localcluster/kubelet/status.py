"""The pod status a kubelet reports, computed from the pod and its container instances.

Pure: `pod_status(pod, init, containers, now=..., ...)` returns the whole `status` object. The
rules follow the kubelet (`getPhase`, `convertToAPIContainerStatuses`, the condition generators
in `pkg/kubelet/status`):

- phase: Pending while an init container has not succeeded or a container has not started;
  Running while one runs (or, under `Always`/`OnFailure`, while failed ones wait to restart);
  Succeeded when all exited 0 under a non-`Always` policy; Failed when one failed under `Never`
  (or an init container failed under `Never`). A terminal phase never changes again.
- container state: `running{startedAt}`; `terminated{exitCode, reason, signal, startedAt,
  finishedAt, containerID}`; or `waiting{reason, message}` (ContainerCreating, PodInitializing,
  CrashLoopBackOff, CreateContainerConfigError). `lastState` is the instance before the current.
- conditions (in a real kubelet's order): PodReadyToStartContainers, Initialized, Ready,
  ContainersReady, PodScheduled; `lastTransitionTime` moves only when the status flips.
- `started` needs the startup probe (if any) to have succeeded, `ready` also the readiness probe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from localcluster.kubelet.model import ContainerView, Instance
from policies.quantity import QuantityError, parse_quantity

__all__ = ["compute_phase", "pod_status", "qos_class"]

_TERMINAL = ("Succeeded", "Failed")


SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."


def pod_status(
    pod: Mapping[str, Any],
    init: Sequence[ContainerView],
    containers: Sequence[ContainerView],
    *,
    now: str,
    host_ip: str = "127.0.0.1",
    pod_ip: str = "127.0.0.1",
    sandbox_ready: bool = True,
    terminating_done: bool = False,
    failure: tuple[str, str] | None = None,
    shutdown: bool = False,
) -> dict[str, Any]:
    """The full `status` for `pod`.

    `terminating_done`: the pod was deleted and all its processes are gone; like kubelets since
    1.27 the pod then reports a terminal phase (Succeeded if every container exited 0).
    `failure`: the kubelet failed the pod as a whole (reason, message), e.g. `DeadlineExceeded`.
    `shutdown`: the node is shutting down and ended the pod's containers; as a kubelet's graceful
    node shutdown does, the pod gets the `DisruptionTarget` condition (reason
    `TerminationByKubelet`) and, once terminal, reason `Terminated` — so a controller can tell
    an environmental stop from the workload's own failure (a Job's podFailurePolicy can ignore
    it; the training-job controller recreates such replicas without counting a restart).
    """
    old = dict(pod.get("status") or {})
    spec = pod.get("spec") or {}
    policy = spec.get("restartPolicy") or "Always"
    has_init = bool(spec.get("initContainers"))
    sidecars = frozenset(
        str(c.get("name"))
        for c in spec.get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    )
    init_statuses = [
        _container_status(v, default_reason="PodInitializing", init=v.name not in sidecars)
        for v in init
    ]
    default = "PodInitializing" if has_init else "ContainerCreating"
    statuses = [_container_status(v, default_reason=default) for v in containers]

    phase = compute_phase(policy, init_statuses, statuses, sidecars)
    if old.get("phase") in _TERMINAL:
        phase = old["phase"]
    elif terminating_done:
        finished = all((s["state"].get("terminated") or {}).get("exitCode") == 0 for s in statuses)
        phase = "Succeeded" if finished and statuses else "Failed"

    if failure is not None and phase not in _TERMINAL:
        phase = "Failed"
    status: dict[str, Any] = {"phase": phase}
    if failure is not None:
        status["reason"], status["message"] = failure
    elif shutdown and phase in _TERMINAL and old.get("phase") not in _TERMINAL:
        status["reason"], status["message"] = "Terminated", SHUTDOWN_MESSAGE
    elif old.get("reason") and phase in _TERMINAL:
        status["reason"], status["message"] = old["reason"], old.get("message", "")
    status["conditions"] = _conditions(
        old.get("conditions") or [],
        phase,
        init_statuses,
        statuses,
        sidecars,
        sandbox_ready=sandbox_ready and not terminating_done and phase not in _TERMINAL,
        now=now,
    )
    disrupted = [c for c in old.get("conditions") or [] if c.get("type") == "DisruptionTarget"]
    if shutdown and not disrupted and old.get("phase") not in _TERMINAL:
        disrupted = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": SHUTDOWN_MESSAGE,
                "lastTransitionTime": now,
            }
        ]
    status["conditions"] += disrupted
    status["hostIP"] = host_ip
    status["hostIPs"] = [{"ip": host_ip}]
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    elif old.get("podIP"):  # not set up (yet, or again after a restart): keep what was reported
        status["podIP"] = old["podIP"]
        status["podIPs"] = old.get("podIPs") or [{"ip": old["podIP"]}]
    # else none until the pod's network is set up, as a kubelet reports it
    status["startTime"] = old.get("startTime") or now
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = statuses
    status["qosClass"] = qos_class(spec)
    return status


def compute_phase(
    restart_policy: str,
    init_statuses: Sequence[Mapping[str, Any]],
    statuses: Sequence[Mapping[str, Any]],
    sidecars: frozenset[str] = frozenset(),
) -> str:
    """The kubelet's `getPhase` over container statuses (API shape).

    `sidecars` names the restartable init containers (`restartPolicy: Always`): they must have
    started before the pod leaves Pending, keep it Running while they run, and their exits
    never decide success or failure.
    """
    pending_init = failed_init = pending_sidecars = 0
    running = waiting = stopped = succeeded = 0
    for s in init_statuses:
        state, last = s["state"], (s.get("lastState") or {}).get("terminated")
        if s["name"] in sidecars:
            if "running" in state:
                running += 1
                if not s.get("started"):
                    pending_sidecars += 1
            elif "waiting" in state and last is None:
                pending_sidecars += 1
            continue
        term = state.get("terminated")
        if term is not None:
            failed_init += term.get("exitCode") != 0
        elif "waiting" in state and last is not None:
            failed_init += last.get("exitCode") != 0
        else:
            pending_init += 1  # running, or not started
    for s in statuses:
        state = s["state"]
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"].get("exitCode") == 0:
                succeeded += 1
        elif "terminated" in (s.get("lastState") or {}):
            stopped += 1  # waiting to restart
        else:
            waiting += 1
    if failed_init and restart_policy == "Never":
        return "Failed"
    if pending_init or pending_sidecars or waiting:
        return "Pending"
    if running > 0:
        return "Running"
    if stopped > 0:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def qos_class(spec: Mapping[str, Any]) -> str:
    """Guaranteed / Burstable / BestEffort from the containers' cpu and memory resources."""
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    any_set = False
    for c in containers:
        res = c.get("resources") or {}
        c_limits = _quantities(res.get("limits"))
        c_requests = {**c_limits, **_quantities(res.get("requests"))}
        if c_requests or c_limits:
            any_set = True
        for name, value in c_requests.items():
            requests[name] = requests.get(name, Decimal(0)) + value
        for name, value in c_limits.items():
            limits[name] = limits.get(name, Decimal(0)) + value
        if set(c_limits) != {"cpu", "memory"} or any(
            c_requests.get(k) != c_limits.get(k) for k in ("cpu", "memory")
        ):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _quantities(values: Any) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name in ("cpu", "memory"):
        if isinstance(values, Mapping) and name in values:
            try:
                q = parse_quantity(values[name])
            except QuantityError:
                continue
            if q != 0:
                out[name] = q
    return out


def _terminated(i: Instance) -> dict[str, Any]:
    term: dict[str, Any] = {
        "exitCode": i.exit_code,
        "reason": i.reason or ("Completed" if i.exit_code == 0 else "Error"),
        "startedAt": i.started_at,
        "finishedAt": i.finished_at,
        "containerID": i.container_id,
    }
    if i.signal:
        term["signal"] = i.signal
    if i.message:
        term["message"] = i.message
    return term


def _container_status(
    view: ContainerView, *, default_reason: str, init: bool = False
) -> dict[str, Any]:
    last, previous = view.last, view.previous
    state: dict[str, Any]
    last_state: dict[str, Any] = {}
    if last is not None and last.running:
        state = {"running": {"startedAt": last.started_at}}
        if previous is not None:
            last_state = {"terminated": _terminated(previous)}
    elif view.waiting_reason:
        waiting: dict[str, Any] = {"reason": view.waiting_reason}
        if view.waiting_message:
            waiting["message"] = view.waiting_message
        state = {"waiting": waiting}
        if last is not None:
            last_state = {"terminated": _terminated(last)}
    elif last is not None:
        state = {"terminated": _terminated(last)}
        if previous is not None:
            last_state = {"terminated": _terminated(previous)}
    else:
        state = {"waiting": {"reason": default_reason}}
    running = "running" in state
    started = running and view.started is not False
    status: dict[str, Any] = {
        "name": view.name,
        "state": state,
        "lastState": last_state,
        # An init container counts as ready once it has completed, as the kubelet reports.
        "ready": (started and view.ready is not False)
        or (init and last is not None and last.succeeded),
        "restartCount": last.attempt if last is not None else 0,
        "image": view.image,
        "imageID": "",
        "started": started,
    }
    if last is not None:
        status["containerID"] = last.container_id
    return status


def _condition(
    old: Sequence[Mapping[str, Any]],
    kind: str,
    ok: bool,
    now: str,
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    value = "True" if ok else "False"
    previous = next((c for c in old if c.get("type") == kind), None)
    since = (
        previous.get("lastTransitionTime")
        if previous is not None and previous.get("status") == value
        else None
    )
    cond: dict[str, Any] = {
        "type": kind,
        "status": value,
        "lastProbeTime": None,
        "lastTransitionTime": since or now,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _conditions(
    old: Sequence[Mapping[str, Any]],
    phase: str,
    init_statuses: Sequence[Mapping[str, Any]],
    statuses: Sequence[Mapping[str, Any]],
    sidecars: frozenset[str],
    *,
    sandbox_ready: bool,
    now: str,
) -> list[dict[str, Any]]:
    incomplete = [
        s["name"]
        for s in init_statuses
        if (
            not s.get("started")
            if s["name"] in sidecars
            else (s["state"].get("terminated") or {}).get("exitCode") != 0
        )
    ]
    # Sidecars count for readiness like regular containers.
    unready = [s["name"] for s in init_statuses if s["name"] in sidecars and not s["ready"]]
    unready += [s["name"] for s in statuses if not s["ready"]]
    completed = phase == "Succeeded"
    conds = [_condition(old, "PodReadyToStartContainers", sandbox_ready, now)]
    if incomplete and not completed:
        conds.append(
            _condition(
                old,
                "Initialized",
                False,
                now,
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(incomplete)}]",
            )
        )
    else:
        conds.append(_condition(old, "Initialized", True, now, "PodCompleted" if completed else ""))
    for kind in ("Ready", "ContainersReady"):
        if completed:
            conds.append(_condition(old, kind, False, now, "PodCompleted"))
        elif unready:
            conds.append(
                _condition(
                    old,
                    kind,
                    False,
                    now,
                    "ContainersNotReady",
                    f"containers with unready status: [{' '.join(unready)}]",
                )
            )
        else:
            conds.append(_condition(old, kind, True, now))
    scheduled = next((c for c in old if c.get("type") == "PodScheduled"), None)
    conds.append(
        dict(scheduled) if scheduled is not None else _condition(old, "PodScheduled", True, now)
    )
    return conds
