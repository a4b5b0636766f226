"""The planning core: from a job and its children to the next status, actions and events.

Why pure: every decision of the controller — which pods to create, restart or delete, when the
job succeeds, fails or hits its deadline, what the status says — is a function of what the
controller observed and of `now`. Keeping it free of I/O and of the clock makes it exhaustively
testable from tables and replayable from a recorded observation; the shell (reconciler) only
reads children, writes the returned status first and then executes the actions (crash-safety:
`controller.restarts`).

One round (`plan`):

1. default the job again (`policies.default`) and view it (`controller.spec`);
2. observe each replica `<job>-<type>-<i>`: its pod (missing, terminating, or in a phase),
   its restart count S (status, raised to the pod's annotation A plus the kubelet's restarts
   K of a pod restarted in place, if that is higher);
3. a job already Succeeded/Failed is terminal: only clean-up runs, its phase, its
   Running/Completed/Failed conditions and completionTime never change (ReplicaFailure may
   still turn True, never back: `controller.lifecycle`);
4. otherwise decide, in this order: the master succeeded → Succeeded (also while a pause is
   requested: a finished job ignores pause); disruptions (`DisruptionTarget`: recreated, not
   counted, also in debug mode; not while paused); restarts (not while paused or debugging;
   a replica on a lost node, `controller.lostnodes`, is one: counted once, its pod
   force-deleted, or under Never / in debug mode the job fails NodeLost naming node and pod;
   the master first against the shared budget — in place: the kubelet's restarts counted,
   a run awaiting one holding a unit, a pod with none left stopped; recreated: each after its
   crash-loop delay, the time left joining `requeue_after`); the master failed without a
   restart → Failed; the deadline → Failed (DeadlineExceeded). A job that ends in this round
   counts no restart of its own (the kubelet's happened: they stay counted);
5. actions: create missing services (any time before the end) and missing pods (running job,
   not while their old pod is still terminating, never a stopped replica's); delete pods that
   restart, were disrupted or are stopped, keeping their last run's log first
   (`controller.attempts`), and keep the log `--previous` reads of pods restarted in place;
   delete every pod when paused; clean up when finished (`clean_up`);
6. the status (`controller.status`) and one event per transition, found by comparing the
   old status with the new one — so planning again from the returned status and the same
   children yields the same status and no events (the same actions come back: repeating them
   is harmless, creates answer AlreadyExists and deletes carry a uid precondition).

Job semantics where the seeds are silent are listed in docs/CONTROLLER.md ("Job semantics").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import policies
from controller import attempts as at
from controller import tensorboard as tb
from controller.acting import BACKOFF, FINISHED, Acting, Replica
from controller.actions import Action, Event, Plan
from controller.lifecycle import (
    Observed,
    Outcome,
    cleanup_policy,
    condition_events,
    conditions_for,
    deadline_left,
    deadline_settle_left,
    ended_on_its_own,
    replica_failure,
    with_condition,
)
from controller.lostnodes import DEFAULT_GRACE, Lost, lost_pod, not_ready_wait
from controller.refusals import keep_failed_create, refused_before
from controller.replicas import Mode
from controller.restarts import (
    Budget,
    Decision,
    annotated_count,
    decide,
    disruption,
    in_place,
    in_place_decision,
    last_exit,
    observed_count,
    restart_event,
    restart_wait,
    waiting_restart,
    wants_restart,
)
from controller.spec import JobView, view
from controller.status import aggregate, fmt_time, get_condition, pod_ready, replica_entry

__all__ = ["Action", "Event", "Plan", "plan"]


def plan(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    services: list[dict[str, Any]],
    now: datetime,
    *,
    tensorboard: dict[str, Any] | None = None,
    nodes: Mapping[str, Mapping[str, Any]] | None = None,
    lost_node_grace: float = DEFAULT_GRACE,
) -> Plan:
    """The next status, the actions and the events for `job` given its children at `now`.

    `nodes`: the Nodes by name (those the pods run on suffice), to tell the replicas whose
    node is lost (`controller.lostnodes`, not Ready for `lost_node_grace` seconds)."""
    defaulted, _ = policies.default(job)
    r = _Round(view(defaulted), pods, services, now, tensorboard)
    return r.observe_nodes(nodes or {}, lost_node_grace).run()


class _Round(Acting):
    def __init__(
        self,
        job: JobView,
        pods: list[dict[str, Any]],
        services: list[dict[str, Any]],
        now: datetime,
        deployment: dict[str, Any] | None,
    ) -> None:
        self.now = now
        self.now_s = fmt_time(now)
        self.old = job.old_status
        self.deployment = deployment
        pods_by = {(p.get("metadata") or {}).get("name"): p for p in pods}
        self.services_by = {(s.get("metadata") or {}).get("name"): s for s in services}
        self.old_entries: dict[str, dict[str, Any]] = {
            r["name"]: r
            for task in self.old.get("tasks") or []
            for r in task.get("replicas") or []
            if isinstance(r, dict) and "name" in r
        }
        replicas: list[Replica] = []
        for rid in job.replicas():
            pod = pods_by.get(rid.name)
            old_count = self.old_entries.get(rid.name, {}).get("restartCount")
            known = old_count if isinstance(old_count, int) else 0
            count = known
            if pod is not None:
                known = max(known, annotated_count(pod))
                # A disrupted pod's kubelet restarts since the last round are the disruption's.
                count = known if disruption(pod) else max(known, observed_count(pod))
            replicas.append(Replica(rid, pod, self.services_by.get(rid.name), known, count))
        super().__init__(job, replicas, self.old_entries)
        self.events: list[Event] = []
        self.waits: list[float] = []  # seconds left of the crash-loop delays being waited
        self.start: str = self.old.get("startTime") or self.now_s
        self.requeue_after: float | None = None
        self.node_waits: list[float] = []  # seconds until a not Ready node's pods are lost

    def observe_nodes(self, nodes: Mapping[str, Mapping[str, Any]], grace: float) -> _Round:
        """Note the replicas whose pod is on a lost node, and when a not Ready node's will be."""
        for r in self.replicas:
            if r.pod is None:
                continue
            found = lost_pod(r.pod, nodes, self.now, grace)
            if found is not None:
                self.lost[r.rid.name] = found
                continue
            wait = not_ready_wait(r.pod, nodes, self.now, grace)
            if wait is not None and (r.pod_phase not in FINISHED or r.terminating):
                self.node_waits.append(wait)
        return self

    # --- decisions ------------------------------------------------------------------------

    def _exit(self, r: Replica) -> int | None:
        """The main container's last exit code (from the old status once the pod is gone)."""
        if r.pod is not None:
            term = last_exit(r.pod, self.job.kind.main_container) or {}
            code = term.get("exitCode")
            return code if isinstance(code, int) else None
        runs = self.old_entries.get(r.rid.name, {}).get("attempts") or [{}]
        code = runs[-1].get("exitCode") if isinstance(runs[-1], dict) else None
        return code if isinstance(code, int) else None

    def _describe_exit(self, r: Replica) -> str:
        if r.rid.name in self.lost and r.pod_phase not in FINISHED:
            return self.lost[r.rid.name].describe()
        code = self._exit(r)
        if code is not None:
            return f"exit code {code}"
        reason = ((r.pod or {}).get("status") or {}).get("reason")
        return f"no exit code (pod reason {reason})" if reason else "no exit code"

    def _disruptions(self) -> None:
        """Mark every live pod ended by its environment for recreation (nothing counted)."""
        for r in self.replicas:
            if r.rid.name in self.lost and r.pod_phase not in FINISHED:
                continue  # lost, not disrupted: `_lost_replica` decides
            if r.live and r.pod is not None and disruption(r.pod) is not None:
                self.decisions[r.rid.name] = Decision.DISRUPTED

    def _restarts(self) -> Outcome | None:
        """Decide every terminated replica's restart; the master's failure may end the job."""
        limit = self.job.backoff_limit
        budget = Budget(limit, sum(r.known for r in self.replicas))
        master = self._master()
        order = sorted(self.replicas, key=lambda r: r is not master)
        outcome: Outcome | None = None
        main = self.job.kind.main_container
        for r in order:
            phase = r.pod_phase
            on_lost = self.lost.get(r.rid.name)
            if on_lost is not None and phase not in FINISHED and r.rid.name not in self.stopped:
                budget.used += r.count - r.known
                lost_end = self._lost_replica(r, on_lost, budget)
                outcome = outcome or lost_end  # the master's, served first, stands
                continue
            if (
                not r.live
                or r.pod is None
                or r.rid.name in self.stopped
                or self.decisions.get(r.rid.name) is Decision.DISRUPTED
            ):
                budget.used += r.count - r.known  # restarts seen: they happened
                continue
            pod_policy = in_place(r.pod)
            if phase not in FINISHED:
                if pod_policy is None:
                    continue
                ended = waiting_restart(r.pod, main)
                found = in_place_decision(pod_policy, ended, r.count - r.known, budget)
                if found is None:
                    continue
                self.decisions[r.rid.name] = found
                if found is Decision.STOP:
                    self.stopped[r.rid.name] = BACKOFF
                    if r is master:
                        text = (
                            f"pod {r.rid.name} failed with {self._describe_exit(r)} and the "
                            f"backoff limit ({limit}) is used up"
                        )
                        outcome = Outcome("Failed", "BackoffLimitExceeded", f"master {text}")
                continue
            budget.used += r.count - r.known
            policy = self._policy(r)
            want = wants_restart(policy, phase, self._exit(r), is_master=r is master)
            wait = restart_wait(r.pod, main, r.count, self.now) if want else 0.0
            decision = decide(want, r.count, observed_count(r.pod), budget, wait)
            self.decisions[r.rid.name] = decision
            if decision is Decision.COUNT:
                r.count += 1
            elif decision is Decision.WAIT:
                self.waits.append(wait)
            if r is master and phase == "Failed":
                if decision is Decision.EXHAUSTED:
                    why, reason = f"the backoff limit ({limit}) is used up", "BackoffLimitExceeded"
                elif decision is Decision.NONE:
                    why, reason = f"restartPolicy {policy} does not restart it", "MasterFailed"
                else:
                    continue
                text = f"pod {r.rid.name} failed with {self._describe_exit(r)} and {why}"
                outcome = Outcome("Failed", reason, f"master {text}")
        return outcome

    def _lost_replica(self, r: Replica, found: Lost, budget: Budget) -> Outcome | None:
        """A replica whose pod is on a lost node and had not ended: restarted as its policy
        says, counted once (S > A afterwards: `decide` answers ALREADY_COUNTED while the pod
        lingers), or the job fails naming the node and the pod (docs/CONTROLLER.md)."""
        name = r.rid.name
        policy = self._policy(r)
        if policy == "Never" or self.job.debugging:
            why = "restartPolicy Never" if policy == "Never" else "debug mode"
            text = f"pod {name} cannot go on: {found.describe()} and {why} restarts nothing"
            return Outcome("Failed", "NodeLost", text)
        assert r.pod is not None
        decision = decide(True, r.count, observed_count(r.pod), budget)
        self.decisions[name] = decision
        if decision is Decision.COUNT:
            r.count += 1
        elif decision is Decision.EXHAUSTED:
            limit = self.job.backoff_limit
            text = (
                f"pod {name} cannot be restarted: {found.describe()} and the backoff limit "
                f"({limit}) is used up"
            )
            return Outcome("Failed", "BackoffLimitExceeded", text)
        return None

    def _lost_in_debug(self) -> Outcome | None:
        """Debug mode restarts nothing: a lost replica ends the job (`_lost_replica`)."""
        for r in self.replicas:
            found = self.lost.get(r.rid.name)
            if found is not None and r.pod_phase not in FINISHED:
                return self._lost_replica(r, found, Budget(None, 0))
        return None

    def _decide(self, pausing: bool, paused_cond: dict[str, Any] | None) -> Outcome | None:
        master = self._master()
        if not self.job.debugging and master and master.pod_phase == "Succeeded":
            return Outcome("Succeeded", "Succeeded", "The job has finished successfully.")
        if pausing:
            return None
        before = {r.rid.name: r.count for r in self.replicas}
        self._disruptions()
        outcome = self._lost_in_debug() if self.job.debugging else self._restarts()
        left = None
        if outcome is None:
            outcome, left = self._deadline(paused_cond)
        if outcome is not None:  # the job ends: nothing restarts, nothing is counted
            for r in self.replicas:
                r.count = before[r.rid.name]
            self.decisions.clear()
            return outcome
        timers = [t for t in (left, *self.waits) if t is not None]
        self.requeue_after = min(timers) if timers else None
        return None

    def _failures(self, finished: bool) -> list[str]:
        """The replicas whose pod Failed and will not be restarted, as messages.

        Running: a live Failed pod that neither restarts (now or after its delay) nor was
        disrupted — its policy or the budget said no, or the job is debugging. Finished: every
        pod that ended Failed on its own (not by a disruption, not by a deletion).
        """
        main = self.job.kind.main_container
        out = []
        for r in self.replicas:
            if r.rid.name in self.stopped:
                if self.stopped[r.rid.name] == BACKOFF or self._exit(r) != 0:
                    out.append(f"pod {r.rid.name} failed with {self._describe_exit(r)}")
                continue
            if r.pod is None or disruption(r.pod) is not None:
                continue
            if finished:
                failed = ended_on_its_own(r.pod, main) == "Failed"
            else:
                failed = (
                    r.live
                    and r.pod_phase == "Failed"
                    and self.decisions.get(r.rid.name, Decision.NONE)
                    in (Decision.NONE, Decision.EXHAUSTED)
                )
            if failed:
                out.append(f"pod {r.rid.name} failed with {self._describe_exit(r)}")
        return out

    def _deadline(self, paused_cond: dict[str, Any] | None) -> tuple[Outcome | None, float | None]:
        left = deadline_left(self.job, self.start, paused_cond, self.now)
        if left is None or left > 0:
            return None, left
        settle = deadline_settle_left(self.job.obj, self.now)
        if settle > 0:  # shortened just now: decide once the edit has stood (or was reverted)
            return None, settle
        seconds = self.job.active_deadline_seconds
        return (
            Outcome(
                "Failed",
                "DeadlineExceeded",
                f"The job was active longer than activeDeadlineSeconds ({seconds}s).",
            ),
            None,
        )

    # --- the round ------------------------------------------------------------------------

    def run(self) -> Plan:
        job, old = self.job, self.old
        finished_before = old.get("phase") in FINISHED
        old_conditions = old.get("conditions") or []
        outcome: Outcome | None = None
        if finished_before:
            failed = get_condition(old_conditions, "Failed") or {}
            cleanup = cleanup_policy(job, failed.get("reason"))
            self.act_finished(cleanup, ended_before=True)
            failure = replica_failure(
                get_condition(old_conditions, "ReplicaFailure"),
                self._failures(finished=True),
                self.now_s,
                finished=True,
            )
            conditions, phase = with_condition(list(old_conditions), failure), old["phase"]
        else:
            pausing = job.pause_requested
            observed = Observed.of(old_conditions, pausing, self.now_s)
            outcome = self._decide(pausing, observed.paused)
            if outcome is not None:
                self.act_finished(cleanup_policy(job, outcome.reason))
            else:
                mode = (
                    Mode.DEBUG
                    if job.debugging
                    else Mode.RESUME
                    if observed.paused is not None
                    else Mode.TRAIN
                )
                self.act_running(pausing, mode)
            master = self._master()
            conditions, phase = conditions_for(
                observed,
                outcome=outcome,
                pausing=pausing and outcome is None,
                initialized=all(r.pod is not None and r.service is not None for r in self.replicas),
                all_up=all(
                    self.phases[r.rid.name] in ("Running", *FINISHED) for r in self.replicas
                ),
                master_unknown=bool(master and self.phases[master.rid.name] == "Unknown"),
                failures=(
                    [] if pausing and outcome is None else self._failures(outcome is not None)
                ),
            )
            creating = "Creating" in self.phases.values() or any(
                r.service is None for r in self.replicas
            )
            conditions = keep_failed_create(conditions, old_conditions, creating=creating)
        self.release_lost()
        self.keep_previous()
        status = self._status(conditions, phase, outcome, finished_before)
        self._events(status, outcome)
        tb_status, tb_actions, tb_events = tb.plan_tensorboard(
            job, self.deployment, self.services_by.get(tb.name_of(job)), old.get("tensorboard")
        )
        if tb_status is not None:
            status["tensorboard"] = tb_status
        self.actions.extend(tb_actions)
        self.events.extend(tb_events)
        # Whatever the job's state (running, paused, finished with a pod left Terminating):
        # no event marks the end of a node's grace.
        timers = [t for t in (self.requeue_after, *self.node_waits) if t is not None]
        requeue = min(timers) if timers else None
        return Plan(status, tuple(self.actions), tuple(self.events), requeue)

    def _status(
        self,
        conditions: list[dict[str, Any]],
        phase: str,
        outcome: Outcome | None,
        finished_before: bool,
    ) -> dict[str, Any]:
        tasks = []
        for t in self.job.types:
            mine = [r for r in self.replicas if r.rid.type == t.type]
            entries = [self._entry(r) for r in mine]
            restarts = sum(r.count for r in mine)
            tasks.append({"type": t.type, "restartCount": restarts, "replicas": entries})
        ready = sum(
            1
            for r in self.replicas
            if r.pod is not None and self.phases[r.rid.name] == "Running" and pod_ready(r.pod)
        )
        status: dict[str, Any] = {
            "conditions": conditions,
            "phase": phase,
            "tasks": tasks,
            "aggregate": aggregate(list(self.phases.values())),
            "readyReplicas": f"{ready}/{len(self.replicas)}",
            "backoffCount": sum(r.count for r in self.replicas),
            "startTime": self.start,
        }
        completion = self.old.get("completionTime")
        if completion is None and outcome is not None:
            completion = self.now_s
        if completion is not None:
            status["completionTime"] = completion
        generation = self.job.generation
        if generation is not None:
            status["observedGeneration"] = generation
        return status

    def _entry(self, r: Replica) -> dict[str, Any]:
        name = r.rid.name
        old = self.old_entries.get(name)
        entry = replica_entry(name, self.phases[name], r.count, r.pod, old)
        runs = at.attempts(
            (old or {}).get("attempts"),
            r.pod,
            self.job.kind.main_container,
            self.kept.get(name),
        )
        if runs:
            entry["attempts"] = runs
        if name in self.stopped:
            entry["stopped"] = self.stopped[name]
        return entry

    def _newly_seen(self, r: Replica, phase: str) -> bool:
        """Whether the old status did not yet show this very pod in `phase` (event once)."""
        old = self.old_entries.get(r.rid.name) or {}
        uid = ((r.pod or {}).get("metadata") or {}).get("uid")
        return old.get("phase") != phase or old.get("uid") != uid

    def _events(self, status: dict[str, Any], outcome: Outcome | None) -> None:
        old_phase = {n: e.get("phase") for n, e in self.old_entries.items()}
        again = refused_before(self.old.get("conditions") or [])  # retries: reported again
        created = [
            n
            for n, p in self.phases.items()
            if p == "Creating" and (again or old_phase.get(n) != p)
        ]
        if created:
            message = "created pod " + ", ".join(created)
            self.events.append(Event("Normal", "SuccessfulCreate", message, tuple(created)))
        for r in self.replicas:
            decision = self.decisions.get(r.rid.name)
            if decision is Decision.DISRUPTED and not self._newly_seen(r, "Failed"):
                continue
            event = restart_event(
                decision,
                r.rid.name,
                self._describe_exit(r),
                self._policy(r),
                self.job.backoff_limit,
                disruption(r.pod or {}) if decision is Decision.DISRUPTED else None,
            )
            if event is not None:
                self.events.append(event)
        deleted = [n for n, p in self.phases.items() if p == "Deleted" and old_phase.get(n) != p]
        if deleted:
            self.events.append(
                Event("Normal", "SuccessfulDelete", "deleted pod " + ", ".join(deleted))
            )
        self.events.extend(condition_events(self.old.get("conditions") or [], status["conditions"]))
