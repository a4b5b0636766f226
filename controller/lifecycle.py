"""The job's life cycle: conditions, phase, deadline and clean-up, as small pure rules.

Why apart from `controller.plan`: these are the semantics users read in `kubectl get` and that
the seeds describe (状态, 成功和失败, 清除策略, 暂停模式); the round in `plan` only gathers the
facts they need.

Conditions (seeds): Initialized, Running, ReplicaFailure, Completed, Failed, plus Paused from
the first pause on; always in that order, all five present from the first round.
- Initialized: True once every replica's pod and service have been seen (stays True).
- Running: True once every replica's pod has run (Running, Succeeded or Failed) and stays True
  while the job runs — restarts do not flip it; False while Pending/Resuming, when paused
  (reason Paused) and at the end (the end's reason and message, as the seed's example).
- ReplicaFailure (seed: 有一个或多个副本出现错误): True whenever some replica's pod is Failed
  and will not be restarted — its policy or the budget says no, the job is debugging, or the
  job has ended (reason ReplicaFailed, the message names each pod and its exit code); else
  False "All pods are running normally." (the seed's text). A pod ended by a disruption
  (`DisruptionTarget`) or being restarted is not a failure; failures are not judged while
  pausing. On a finished job it is still recomputed from the pods that remain, but once True
  it stays True: when clean-up removed the failed pods, the condition keeps its reason and
  message (the job did have a failed replica).
- Completed / Failed: True at the end, the other False with the same reason and message (the
  seed's example); both False (reason NotFinished) before.
- Paused: True (reason Paused) while pause is requested; False (reason Resumed) after.

Phase: the end's phase; Paused; Unknown when the master pod's phase is Unknown; Running while
the Running condition is True; Resuming after a pause until every replica runs again; else
Pending.

Deadline (`runPolicy.activeDeadlineSeconds`, Trainer v2 / Kubernetes Job with suspend): counts
from `status.startTime`, or from the last resume (the Paused condition's lastTransitionTime once
it is False) when later, and not while paused; exceeded when the time left is ≤ 0 (Kubernetes
Job: `duration >= allowed`). The time left is returned as `requeue_after` so the shell sets a
timer instead of waiting for the next pod event (a Kubeflow pain point).

A deadline shortened while the job runs (a hand edit that GitOps self-heal may revert within
a second) ends the job only once the new value has stood for `DEADLINE_SETTLE` seconds: when
the deadline is passed and `activeDeadlineSeconds` was written (its newest `managedFields`
entry's time) after the job was created and less than `DEADLINE_SETTLE` ago, the round waits
(a timer for the rest) and decides again with the spec as it is then. A deadline reached in
the ordinary way is not delayed (the field was written at creation), nor on a server that
keeps no `managedFields`.

Clean-up (`runPolicy.cleanUpPolicy`, seeds 清除策略) once the job has ended: None keeps every
pod; All deletes every pod and service; Unfinished deletes the pods still Pending, Running or
Unknown and their services. A job failed by its deadline deletes its unfinished pods whatever
the policy says (a deadline must stop the work, as a Kubernetes Job's does); All still deletes
everything.

A replica's phase after the end (`ended_on_its_own`): under All, a removed pod shows Deleted.
Otherwise a replica that had ended on its own keeps its terminal phase once its pod is gone
(taken from the old status entry), and a pod that is being deleted but whose main container
had finished before the deletion was requested (finishedAt < deletionTimestamp −
deletionGracePeriodSeconds: the clean-up raced with its exit) shows its own Succeeded/Failed.
Deleted is for a replica removed while unfinished: a pod that exits in response to the
clean-up's SIGTERM (143, or 0 from a handler) stays Deleted and is never a replica failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from controller.actions import Event
from controller.spec import JobView
from controller.status import CONDITION_ORDER, condition, get_condition, parse_time, terminated_at

__all__ = [
    "DEADLINE_SETTLE",
    "Observed",
    "Outcome",
    "clean_up",
    "cleanup_policy",
    "condition_events",
    "conditions_for",
    "deadline_left",
    "deadline_settle_left",
    "ended_on_its_own",
    "replica_failure",
    "with_condition",
]

DEADLINE_SETTLE = 10.0
"""Seconds a just-shortened deadline waits before it ends a job (module docstring)."""
ALL_RUNNING = "All pods are running normally."
NOT_FINISHED = "The job has not finished."


@dataclass(frozen=True)
class Outcome:
    """How the job ended in this round."""

    phase: str  # Succeeded or Failed
    reason: str
    message: str


@dataclass(frozen=True)
class Observed:
    """The old conditions, `now`, and the Paused condition this round will write (or None)."""

    old: list[dict[str, Any]]
    now: str
    paused: dict[str, Any] | None

    @staticmethod
    def of(old: list[dict[str, Any]], pausing: bool, now: str) -> Observed:
        before = get_condition(old, "Paused")
        paused = None
        if pausing:
            paused = condition(
                before,
                "Paused",
                True,
                "Paused",
                "The job is paused: its replicas are deleted or being deleted.",
                now,
            )
        elif before is not None:
            paused = condition(before, "Paused", False, "Resumed", "The job was resumed.", now)
        return Observed(old, now, paused)

    def cond(self, ctype: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(get_condition(self.old, ctype), ctype, status, reason, message, self.now)

    def was_true(self, ctype: str) -> bool:
        return (get_condition(self.old, ctype) or {}).get("status") == "True"


def deadline_left(
    job: JobView, start: str, paused: dict[str, Any] | None, now: datetime
) -> float | None:
    """Seconds until the deadline (≤ 0: passed); None without a deadline or while paused."""
    seconds = job.active_deadline_seconds
    if seconds is None or (paused is not None and paused.get("status") == "True"):
        return None
    since = parse_time(start)
    if paused is not None:
        resumed = parse_time(paused.get("lastTransitionTime"))
        if resumed is not None and (since is None or resumed > since):
            since = resumed
    if since is None:
        return float(seconds)
    return seconds - (now - since).total_seconds()


def deadline_settle_left(obj: dict[str, Any], now: datetime) -> float:
    """Seconds a passed deadline still waits because `activeDeadlineSeconds` was changed
    recently (0: decide now); see the module docstring."""
    meta = obj.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    written: datetime | None = None
    for entry in meta.get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        spec = (entry.get("fieldsV1") or {}).get("f:spec")
        policy = spec.get("f:runPolicy") if isinstance(spec, dict) else None
        if not isinstance(policy, dict) or "f:activeDeadlineSeconds" not in policy:
            continue
        moment = parse_time(entry.get("time"))
        if moment is not None and (written is None or moment > written):
            written = moment
    if written is None or created is None or written <= created:
        return 0.0
    return max(0.0, DEADLINE_SETTLE - (now - written).total_seconds())


def ended_on_its_own(pod: dict[str, Any], container: str) -> str | None:
    """Succeeded/Failed when the pod ended before anyone asked to delete it, else None.

    A pod not being deleted ends on its own when it is terminal. For a pod being deleted, the
    deletion was requested at deletionTimestamp − deletionGracePeriodSeconds; the main
    container must have finished strictly before that (times have second precision: a tie
    reads as killed by the deletion, so a clean-up's SIGTERM is never taken for a failure).
    """
    phase = (pod.get("status") or {}).get("phase")
    if phase not in ("Succeeded", "Failed"):
        return None
    meta = pod.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return str(phase)
    deleting = parse_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    finished = terminated_at(pod, container)
    if deleting is None or not isinstance(grace, int) or finished is None:
        return None
    return str(phase) if finished < deleting - timedelta(seconds=grace) else None


def replica_failure(
    old: dict[str, Any] | None, failures: list[str], now: str, *, finished: bool
) -> dict[str, Any]:
    """The ReplicaFailure condition: True naming `failures`; on a finished job, once True, kept."""
    if failures:
        return condition(old, "ReplicaFailure", True, "ReplicaFailed", "; ".join(failures), now)
    if finished and old is not None and old.get("status") == "True":
        return old
    return condition(old, "ReplicaFailure", False, "AllReplicasHealthy", ALL_RUNNING, now)


def with_condition(conditions: list[dict[str, Any]], cond: dict[str, Any]) -> list[dict[str, Any]]:
    """`conditions` with `cond` replacing (or added as) its type, in `CONDITION_ORDER`."""
    by_type = {c.get("type"): c for c in conditions if isinstance(c, dict)}
    by_type[cond["type"]] = cond
    known = [by_type[t] for t in CONDITION_ORDER if t in by_type]
    return known + [c for t, c in by_type.items() if t not in CONDITION_ORDER]


def clean_up(policy: str, phase: str | None) -> tuple[bool, bool]:
    """(delete the pod, delete the service) of a replica whose live pod is in `phase`.

    `phase` None: no live pod (gone or terminating).
    """
    if policy == "All":
        return phase is not None, True
    if policy == "Unfinished":
        unfinished = phase in ("Pending", "Running", "Unknown")
        return unfinished, unfinished or phase is None
    return False, False


def conditions_for(
    observed: Observed,
    *,
    outcome: Outcome | None,
    pausing: bool,
    initialized: bool,
    all_up: bool,
    master_unknown: bool,
    failures: list[str],
) -> tuple[list[dict[str, Any]], str]:
    """The next conditions (in `CONDITION_ORDER`) and phase of a job that had not ended."""
    o = observed
    conds: dict[str, dict[str, Any]] = {}
    if initialized or o.was_true("Initialized"):
        conds["Initialized"] = o.cond(
            "Initialized", True, "Initialized", "The job has been initialized successfully."
        )
    else:
        conds["Initialized"] = o.cond(
            "Initialized", False, "Creating", "Creating the job's pods and services."
        )
    running = False
    if outcome is not None:
        conds["Running"] = o.cond("Running", False, outcome.reason, outcome.message)
    elif pausing:
        conds["Running"] = o.cond("Running", False, "Paused", "The job is paused.")
    elif all_up or o.was_true("Running"):
        running = True
        conds["Running"] = o.cond("Running", True, "Running", "All replicas have started.")
    elif o.paused is not None:
        conds["Running"] = o.cond(
            "Running", False, "Resuming", "Waiting for the replicas to run again after a pause."
        )
    else:
        conds["Running"] = o.cond("Running", False, "Pending", "Waiting for the replicas to start.")
    conds["ReplicaFailure"] = replica_failure(
        get_condition(o.old, "ReplicaFailure"), failures, o.now, finished=outcome is not None
    )
    for ctype, phase in (("Completed", "Succeeded"), ("Failed", "Failed")):
        if outcome is None:
            conds[ctype] = o.cond(ctype, False, "NotFinished", NOT_FINISHED)
        else:
            conds[ctype] = o.cond(ctype, outcome.phase == phase, outcome.reason, outcome.message)
    if outcome is not None:
        before = get_condition(o.old, "Paused")
        if before is not None:
            conds["Paused"] = before
    elif o.paused is not None:
        conds["Paused"] = o.paused
    ordered = [conds[t] for t in CONDITION_ORDER if t in conds]
    if outcome is not None:
        phase_now = outcome.phase
    elif pausing:
        phase_now = "Paused"
    elif master_unknown:
        phase_now = "Unknown"
    elif running:
        phase_now = "Running"
    elif o.paused is not None:
        phase_now = "Resuming"
    else:
        phase_now = "Pending"
    return ordered, phase_now


def cleanup_policy(job: JobView, failure_reason: Any) -> str:
    """The clean-up policy that applies: a deadline stops unfinished replicas whatever it says."""
    policy = job.clean_up_policy
    if failure_reason == "DeadlineExceeded" and policy != "All":
        return "Unfinished"
    return policy


_TRANSITION_EVENTS: dict[tuple[str, str], Literal["Normal", "Warning"]] = {
    ("Running", "True"): "Normal",
    ("Paused", "True"): "Normal",
    ("Paused", "False"): "Normal",
    ("Completed", "True"): "Normal",
    ("Failed", "True"): "Warning",
    ("ReplicaFailure", "True"): "Warning",
}


def condition_events(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Event]:
    """One event per condition that turned True (or changed its message, ReplicaFailure)."""
    events = []
    for cond in new:
        kind = _TRANSITION_EVENTS.get((cond["type"], cond["status"]))
        if kind is None:
            continue
        before = get_condition(old, cond["type"])
        if before is None and cond["type"] == "Paused" and cond["status"] == "False":
            continue
        changed = before is None or before.get("status") != cond["status"]
        if before is not None and cond["type"] == "ReplicaFailure":
            changed = changed or before.get("message") != cond["message"]
        if changed:
            events.append(Event(kind, cond["reason"], cond["message"]))
    return events
