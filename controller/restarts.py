"""Whether a terminated replica restarts, and how the restart is counted without double counting.

Why pure and separate: restarts are where a controller crash costs the user money (a lost count
lets a crash-looping job run forever; a double count fails a healthy job early), so the rules
are small functions tested on their own.

Policy (seeds, 重启机制; exit-code classes in `policies.restart`), for a pod in phase
Succeeded or Failed:

- `Never`: never restarts.
- `OnFailure`: restarts a Failed pod.
- `Always`: restarts a Failed or Succeeded pod — except the master succeeding, which ends the
  job successfully.
- `ExitCode`: restarts a Failed pod whose main container exited 130, 137, 138 or 143.

A Failed pod whose main container has no exit code (evicted, its node lost, killed before the
container started) or exited 0 while the pod failed (a sidecar failed) failed for a reason
outside the training code: it is treated as retryable under OnFailure, Always and ExitCode.

Disruptions (`disruption`): a Failed pod (or a pod restarted in place that has not
Succeeded) whose `DisruptionTarget` condition is True was ended by its environment — a kubelet's graceful node shutdown (`TerminationByKubelet`, what a stop of
`trainops up` looks like), an eviction (`EvictionByEvictionAPI`), a preemption
(`PreemptionByScheduler`), a taint (`DeletionByTaintManager`). That is not the replica's
failure: the seeds (成功和失败) say failures caused by the environment "应该被允许自动恢复", and
a Kubernetes Job's `podFailurePolicy` has the action `Ignore` for exactly this condition (the
pod is replaced without counting towards `backoffLimit`). So such a pod is recreated under any
restart policy, Never and debug mode included, without counting and without back-off delay,
and it decides nothing. A Succeeded pod is never a disruption. Nor is a pod on a lost node
that had not ended (the taint manager's `DeletionByTaintManager` included): its run was lost
with the node, and `controller.lostnodes` / the plan count it as a restart.

Crash-loop back-off (`crash_loop_delay`, `restart_wait`): a restart waits
min(300 s, 1 s × 2^S) after the replica's main container ended (S = the replica's restarts so
far), as the kubelet's CrashLoopBackOff does for a container but starting at 1 s instead of the
kubelet's 10 s: a job that fails once gets its retry almost at once, and the doubling still
bounds the waste of a replica that always crashes (restarts at ≥ 1, 3, 7, 15, 31, 63, 127 and
255 s: at most 8 restarts, 9 runs, in the first 5 minutes, then one per 5 minutes; the
kubelet's 10 s start allows 4). The time is the main container's `state.terminated.finishedAt`,
else the pod's Ready (or ContainersReady) condition's lastTransitionTime, else no delay. The
count S only grows (no reset after a long run, unlike the kubelet's 10 minutes): at worst a
long-running replica waits 5 minutes before its next run. While waiting the budget is held
for it (so the master first still holds) but nothing is counted or deleted.

Budget: every restart counts against `spec.runPolicy.backoffLimit`, shared by all replicas
(seeds: 重启次数为所有副本共享). An absent limit means no limit: Kubeflow training-operator
v1.9 only checks `backoffLimit` when it is set (`pastBackoffLimit` returns false for nil).
The master is served first when several replicas want a restart in the same round, because the
master's failure decides the job.

Crash-safe counting (docs/CONTROLLER.md): the shell writes the status before it executes the
actions. The status keeps each replica's count S (`tasks[].replicas[].restartCount`); each
pod carries the annotation A (`batch.tensorstack.dev/restart-count`) = S when it was created.
For a terminated pod that should restart: S > A (+ K, its kubelet restarts) means the restart
was counted and the controller stopped before deleting the pod → delete it, count nothing; otherwise count it
(S+1, backoff+1) if the budget allows, and delete it. A pod observed with A > S (a status
lost or rolled back) raises S to A, so a count is never lost.

In place (`pod_restart_policy`, `in_place_decision`): a replica whose policy is `OnFailure` or
`Always` gets a pod with that `restartPolicy` (the master's `Always` becomes `OnFailure`: its
success ends the job), so the kubelet restarts its containers in the pod and keeps the previous
attempt's log (`kubectl logs --previous`), as Kubeflow's training-operator does. ExitCode must
look at the exit code before restarting, and Never and debug mode restart nothing: those pods
are `Never` and the controller recreates them. A pod is also `Never` when the budget is used up
at its creation (the kubelet's first restart is immediate: the controller could not stop it).
The replica's count is then A + K, K = the sum of its containers' `restartCount` (what
`kubectl get pods` shows as RESTARTS), raised into S every round. The budget still holds: a
kubelet restart observed since the last round (A + K above S) takes a unit; a main container
that ended and will be restarted by the kubelet (terminated, or waiting with a
`lastState.terminated`) reserves one (master first). When no unit is left the pod is stopped
(deleted, after the controller kept its log): the replica failed for good (the master's
failure fails the job). The kubelet may have restarted a container before the controller saw
the budget used up (its first restart is immediate; another replica used the last unit
meanwhile): that restart is counted — the counts agree with the pods — and the pod is stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from controller import labels as L
from controller.actions import Event
from controller.status import get_condition, parse_time, terminated_at
from policies.restart import RETRYABLE_EXIT_CODES

__all__ = [
    "CRASH_LOOP_CAP",
    "Budget",
    "Decision",
    "annotated_count",
    "crash_loop_delay",
    "decide",
    "disruption",
    "ended_at",
    "exit_code",
    "in_place",
    "in_place_decision",
    "kubelet_restarts",
    "last_exit",
    "observed_count",
    "pod_restart_policy",
    "restart_event",
    "restart_wait",
    "waiting_restart",
    "wants_restart",
    "will_restart",
]

CRASH_LOOP_BASE = 1.0
"""Seconds before a replica's first restart; doubled for each restart it had."""
CRASH_LOOP_CAP = 300.0
"""The longest wait before a restart (the kubelet's CrashLoopBackOff cap, 5 minutes)."""


class Decision(Enum):
    NONE = "none"  # no restart wanted
    ALREADY_COUNTED = "already-counted"  # S > A: delete, count nothing
    COUNT = "count"  # count it and delete
    EXHAUSTED = "exhausted"  # wanted, but the backoff limit is used up
    WAIT = "wait"  # wanted and within budget, but its crash-loop delay has not passed
    DISRUPTED = "disrupted"  # ended by its environment: delete and recreate, count nothing
    IN_PLACE = "in-place"  # the kubelet restarted it in its pod, within budget: counted
    RESTARTING = "restarting"  # ended, the kubelet will restart it: a unit of budget held
    STOP = "stop"  # in place, but no budget left: delete the pod, the replica failed for good


@dataclass
class Budget:
    """The shared backoff budget: `limit` None is unlimited."""

    limit: int | None
    used: int

    def take(self) -> bool:
        if self.limit is not None and self.used >= self.limit:
            return False
        self.used += 1
        return True


def exit_code(pod: dict[str, Any], container: str) -> int | None:
    """The main container's exit code, when it has terminated."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            term = (cs.get("state") or {}).get("terminated")
            code = term.get("exitCode") if isinstance(term, dict) else None
            return code if isinstance(code, int) else None
    return None


def _main_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(cs, dict) and cs.get("name") == container:
            return cs
    return {}


def last_exit(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
    """The main container's last ended run: `state.terminated`, else `lastState.terminated`."""
    cs = _main_status(pod, container)
    for key in ("state", "lastState"):
        term = (cs.get(key) or {}).get("terminated")
        if isinstance(term, dict):
            return term
    return None


def waiting_restart(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
    """The ended run of a main container that is not running now (terminated, or waiting with
    a `lastState.terminated`: CrashLoopBackOff), in a pod that has not ended; else None."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    state = _main_status(pod, container).get("state") or {}
    if "running" in state:
        return None
    return last_exit(pod, container)


def in_place(pod: dict[str, Any]) -> str | None:
    """The pod's own `restartPolicy` when the kubelet restarts it (OnFailure, Always)."""
    policy = (pod.get("spec") or {}).get("restartPolicy")
    return policy if policy in ("OnFailure", "Always") else None


def kubelet_restarts(pod: dict[str, Any]) -> int:
    """K: the restarts the kubelet made in this pod (its containers' `restartCount`)."""
    total = 0
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        count = cs.get("restartCount") if isinstance(cs, dict) else None
        if isinstance(count, int) and count > 0:
            total += count
    return total


def observed_count(pod: dict[str, Any]) -> int:
    """A + K: the replica's restarts as this pod shows them."""
    return annotated_count(pod) + kubelet_restarts(pod)


def pod_restart_policy(
    policy: str, *, is_master: bool, debugging: bool, budget_left: int | None
) -> str:
    """The `restartPolicy` of a new replica pod (module docstring, "In place")."""
    if debugging or policy not in ("OnFailure", "Always") or budget_left == 0:
        return "Never"
    return "Always" if policy == "Always" and not is_master else "OnFailure"


def in_place_decision(
    pod_policy: str, ended: dict[str, Any] | None, new_restarts: int, budget: Budget
) -> Decision | None:
    """The decision for a live, not ended pod the kubelet restarts (`pod_policy`).

    `ended`: the main container's ended run awaiting a restart (`waiting_restart`);
    `new_restarts`: kubelet restarts since the count in status. None: nothing to decide.
    """
    over = False
    for _ in range(max(new_restarts, 0)):
        over = not budget.take() or over
    if over:
        return Decision.STOP
    if will_restart(pod_policy, ended):
        return Decision.RESTARTING if budget.take() else Decision.STOP
    return Decision.IN_PLACE if new_restarts > 0 else None


def will_restart(pod_policy: str | None, ended: dict[str, Any] | None) -> bool:
    """Whether the kubelet restarts a main container whose run `ended` under `pod_policy`."""
    if ended is None or pod_policy not in ("OnFailure", "Always"):
        return False
    return pod_policy == "Always" or ended.get("exitCode") != 0


def annotated_count(pod: dict[str, Any]) -> int:
    """A: the restart count the pod was created with (0 when absent or unreadable)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(L.RESTART_COUNT)
    if not isinstance(value, str) or not value.isdigit():
        return 0
    return int(value)


def wants_restart(policy: str, phase: str, code: int | None, *, is_master: bool) -> bool:
    """Whether `policy` restarts a pod that ended in `phase` with main exit `code`."""
    if phase == "Succeeded":
        return policy == "Always" and not is_master
    if phase != "Failed" or policy == "Never":
        return False
    if policy in ("OnFailure", "Always"):
        return True
    if policy == "ExitCode":
        return code is None or code == 0 or code in RETRYABLE_EXIT_CODES
    raise ValueError(f"unknown restart policy {policy!r}")


def decide(
    want: bool, status_count: int, pod_count: int, budget: Budget, wait: float = 0.0
) -> Decision:
    """The restart decision for one terminated pod (S = `status_count`, A = `pod_count`).

    `wait`: seconds left of its crash-loop delay; a restart that must still wait holds its
    unit of the budget for this round (so a replica served later cannot take it) but is
    neither counted nor executed.
    """
    if not want:
        return Decision.NONE
    if status_count > pod_count:
        return Decision.ALREADY_COUNTED
    if not budget.take():
        return Decision.EXHAUSTED
    return Decision.WAIT if wait > 0 else Decision.COUNT


def disruption(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's `DisruptionTarget` condition when it is True and the pod Failed — or, restarted
    in place, has not Succeeded: a node shutdown ends its containers but the kubelet starts
    them again (a restart of the environment's making, not counted) — else None."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase != "Failed" and (phase == "Succeeded" or in_place(pod) is None):
        return None
    cond = get_condition(status.get("conditions"), "DisruptionTarget")
    return cond if cond is not None and cond.get("status") == "True" else None


def crash_loop_delay(count: int) -> float:
    """Seconds a replica that restarted `count` times waits before its next restart."""
    return min(CRASH_LOOP_CAP, CRASH_LOOP_BASE * 2 ** min(max(count, 0), 16))


def ended_at(pod: dict[str, Any], container: str) -> datetime | None:
    """When the pod's run ended: the main container's finishedAt, else when it became unready."""
    finished = terminated_at(pod, container)
    if finished is not None:
        return finished
    conditions = (pod.get("status") or {}).get("conditions")
    for ctype in ("Ready", "ContainersReady"):
        moment = parse_time((get_condition(conditions, ctype) or {}).get("lastTransitionTime"))
        if moment is not None:
            return moment
    return None


def restart_wait(pod: dict[str, Any], container: str, count: int, now: datetime) -> float:
    """Seconds left before a replica with `count` restarts whose pod ended may restart (0: now).

    Never more than the whole delay, so a clock skew between node and controller cannot
    stretch it.
    """
    since = ended_at(pod, container)
    if since is None:
        return 0.0
    delay = crash_loop_delay(count)
    left = delay - (now - since).total_seconds()
    return max(0.0, min(delay, left))


def restart_event(
    decision: Decision | None,
    name: str,
    exit_text: str,
    policy: str,
    limit: int | None,
    disrupted: dict[str, Any] | None = None,
) -> Event | None:
    """The event of a round's decision on pod `name`, which ended with `exit_text`.

    Stable per replica and exit: the recorder folds repeats into one Event's count (the
    counts themselves are in the status)."""
    budget = "no backoffLimit" if limit is None else f"backoffLimit {limit}"
    if decision is Decision.IN_PLACE:
        text = (
            f"pod {name} was restarted in place after {exit_text} "
            f"(restartPolicy {policy}, {budget})"
        )
        return Event("Warning", "ReplicaRestart", text)
    if decision is Decision.STOP:
        text = f"stopping pod {name} after {exit_text}: the backoff limit ({limit}) is used up"
        return Event("Warning", "BackoffLimitExceeded", text)
    if decision is Decision.COUNT:
        text = f"restarting pod {name} after {exit_text} (restartPolicy {policy}, {budget})"
        return Event("Warning", "ReplicaRestart", text)
    if decision is Decision.DISRUPTED:
        cond = disrupted or {}
        text = (
            f"recreating pod {name}: it was ended by its environment, not by a failure of its "
            f"own ({cond.get('reason', 'DisruptionTarget')}: {cond.get('message', '')}); no "
            "restart is counted"
        )
        return Event("Normal", "ReplicaRecreated", text)
    return None
