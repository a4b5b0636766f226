"""A planning round's actions: which pods and Services to create or delete, whose logs to keep.

Why apart from `controller.plan`: the round decides (restarts, the job's end) and then acts on
those decisions here; the state both share — the job, its replicas as observed, the
decisions, the stopped replicas, the logs kept — lives in `Acting`, which `plan`'s round
extends. Pure like the rest of the planning core: actions are values, the shell runs them.

- Running job (`act_running`): missing Services and pods are created (a pod with the
  `restartPolicy` `controller.restarts.pod_restart_policy` chooses, and the replica's count as
  its annotation), never a stopped replica's; pods are deleted to restart, after a
  disruption, when stopped (the backoff limit used up in place) or paused; a deleted pod's
  last ended run has its log kept first (`controller.attempts`).
- Finished job (`act_finished`): the clean-up policy, and whatever it says an in-place pod
  waiting for the kubelet's restart is stopped (a finished job restarts nothing).
- Every round (`keep_previous`): the run `--previous` reads of each pod restarted in place is
  kept once, before the kubelet's next restart drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller import attempts as at
from controller.actions import REPLICA, Action
from controller.lifecycle import clean_up, ended_on_its_own
from controller.lostnodes import Lost
from controller.replicas import Mode, pod_body, service_body
from controller.restarts import (
    Decision,
    in_place,
    last_exit,
    pod_restart_policy,
    waiting_restart,
    will_restart,
)
from controller.spec import JobView, ReplicaId

__all__ = ["BACKOFF", "FINISHED", "JOB_ENDED", "Acting", "Replica"]

FINISHED = ("Succeeded", "Failed")
BACKOFF = "BackoffLimitExceeded"
JOB_ENDED = "JobEnded"


@dataclass
class Replica:
    rid: ReplicaId
    pod: dict[str, Any] | None
    service: dict[str, Any] | None
    known: int  # S raised to the pod's annotation A: the count before this round's observation
    count: int  # S raised to A + K, K the kubelet's restarts in the pod (`observed_count`)

    @property
    def terminating(self) -> bool:
        return bool(self.pod and (self.pod.get("metadata") or {}).get("deletionTimestamp"))

    @property
    def pod_phase(self) -> str | None:
        if self.pod is None:
            return None
        return (self.pod.get("status") or {}).get("phase") or "Pending"

    @property
    def live(self) -> bool:
        return self.pod is not None and not self.terminating


class Acting:
    """The round's shared state and its actions (module docstring)."""

    def __init__(
        self, job: JobView, replicas: list[Replica], old_entries: dict[str, dict[str, Any]]
    ) -> None:
        self.job = job
        self.replicas = replicas
        self.old_entries = old_entries
        self.actions: list[Action] = []
        self.phases: dict[str, str] = {}
        self.decisions: dict[str, Decision] = {}
        # Replicas stopped for good, and why (their status entry's `stopped`): `BACKOFF` (the
        # limit used up in place) or `JOB_ENDED` (a finished job restarts nothing).
        self.stopped: dict[str, str] = {
            n: str(e["stopped"]) for n, e in old_entries.items() if e.get("stopped")
        }
        self.kept: dict[str, dict[int, dict[str, str]]] = {}  # logs kept this round
        self.lost: dict[str, Lost] = {}  # replicas whose pod is on a lost node

    def _master(self) -> Replica | None:
        return next((r for r in self.replicas if self.job.is_master(r.rid)), None)

    def _policy(self, r: Replica) -> str:
        rtype = self.job.type_of(r.rid.type)
        return rtype.restart_policy if rtype else "Never"

    def _delete_pod(self, r: Replica, reason: str, *, keep: bool = False) -> None:
        """Delete the replica's pod; `keep`: keep the log of its last ended run first.

        A pod on a lost node is deleted at once (`force`) and its log is not read: the API
        server would ask the unreachable kubelet for it."""
        uid = ((r.pod or {}).get("metadata") or {}).get("uid")
        lost = self.lost.get(r.rid.name)
        kept = self._keep(r, latest=True) if keep and lost is None else None
        if lost is not None:
            reason = f"{reason}; {lost.describe()}"
        self.actions.append(
            Action(
                "delete",
                "Pod",
                r.rid.name,
                uid=uid,
                reason=reason,
                keep_log=kept,
                force=lost is not None,
            )
        )

    def release_lost(self) -> None:
        """Force-delete every pod left Terminating on a lost node (an eviction, a delete of
        ours, a clean-up): no kubelet will ever confirm it, and its name blocks the
        replica's next pod."""
        handled = {a.name for a in self.actions if a.kind == "Pod" and a.verb == "delete"}
        for r in self.replicas:
            if r.terminating and r.rid.name in self.lost and r.rid.name not in handled:
                self._delete_pod(r, "terminating")

    def _keep(self, r: Replica, *, latest: bool) -> at.LogKeep | None:
        """Keep the pod's latest ended run's log (`latest`), else the run `--previous` reads
        unless kept already; the status notes it (`self.kept`)."""
        old = self.old_entries.get(r.rid.name, {}).get("attempts") or []
        found = at.keep_run(
            self.job.name, len(self.replicas), old, r.pod, self.job.kind.main_container, latest
        )
        if found is None:
            return None
        self.kept.setdefault(r.rid.name, {}).update(found[1])
        return found[0]

    def keep_previous(self) -> None:
        """Keep the run `--previous` reads of every pod restarted in place, once: the kubelet
        drops it at the next restart (a pod deleted this round kept its own run already)."""
        handled = {a.name for a in self.actions if a.kind == "Pod" and a.verb == "delete"}
        for r in self.replicas:
            if r.pod is None or r.rid.name in handled or not in_place(r.pod):
                continue
            if r.rid.name in self.lost:  # its log is on the unreachable node
                continue
            kept = self._keep(r, latest=False)
            if kept is not None:
                action = Action("keep", "Pod", r.rid.name, reason="previous run", keep_log=kept)
                self.actions.append(action)

    def _new_pod_policy(self, r: Replica) -> str:
        limit = self.job.backoff_limit
        left = None if limit is None else max(0, limit - sum(x.count for x in self.replicas))
        return pod_restart_policy(
            self._policy(r),
            is_master=r is self._master(),
            debugging=self.job.debugging,
            budget_left=left,
        )

    def _delete_service(self, r: Replica, reason: str) -> None:
        svc = r.service
        if svc is None or (svc.get("metadata") or {}).get("deletionTimestamp"):
            return
        uid = (svc.get("metadata") or {}).get("uid")
        self.actions.append(Action("delete", "Service", r.rid.name, uid=uid, reason=reason))

    def act_running(self, pausing: bool, mode: Mode) -> None:
        for r in self.replicas:
            name = r.rid.name
            if r.service is None:
                body = service_body(self.job, r.rid)
                self.actions.append(Action("create", "Service", name, body=body, reason=REPLICA))
            if pausing:
                if r.live:
                    self._delete_pod(r, "pause")
                self.phases[name] = "Deleted"
            elif name in self.stopped:  # the backoff limit is used up: never again
                if r.live:
                    stop = self.decisions.get(name) is Decision.STOP
                    self._delete_pod(r, "backoff limit used up", keep=stop)
                self.phases[name] = "Failed"
            elif r.pod is None:
                policy = self._new_pod_policy(r)
                body = pod_body(
                    self.job, r.rid, restart_count=r.count, mode=mode, restart_policy=policy
                )
                self.actions.append(Action("create", "Pod", name, body=body, reason=REPLICA))
                self.phases[name] = "Creating"
            else:
                decision = self.decisions.get(name)
                if decision in (Decision.COUNT, Decision.ALREADY_COUNTED):
                    self._delete_pod(r, "restart", keep=True)
                elif decision is Decision.DISRUPTED:
                    self._delete_pod(r, "disrupted", keep=True)
                self.phases[name] = r.pod_phase or "Pending"

    def act_finished(self, policy: str, *, ended_before: bool = False) -> None:
        """Clean up a finished job (`ended_before`: in an earlier round)."""
        main = self.job.kind.main_container
        for r in self.replicas:
            delete_pod, delete_service = clean_up(policy, r.pod_phase if r.live else None)
            if r.live and r.pod is not None and in_place(r.pod):
                # A finished job restarts nothing: a pod the kubelet would restart, or has
                # restarted since the last round (its first restart is immediate), is stopped.
                run = waiting_restart(r.pod, main)
                again = will_restart(in_place(r.pod), run) or (ended_before and r.count > r.known)
                if r.rid.name in self.stopped or again:
                    self.stopped.setdefault(r.rid.name, JOB_ENDED)
                    self._delete_pod(r, "the job has ended", keep=True)
                    if delete_service:
                        self._delete_service(r, f"cleanUpPolicy {policy}")
                    last = (last_exit(r.pod, main) or {}).get("exitCode")
                    self.phases[r.rid.name] = "Succeeded" if last == 0 else "Failed"
                    continue
            if r.live and delete_pod:
                self._delete_pod(r, f"cleanUpPolicy {policy}")
            if delete_service:
                self._delete_service(r, f"cleanUpPolicy {policy}")
            if r.live and not delete_pod:
                self.phases[r.rid.name] = r.pod_phase or "Pending"
            else:
                ended = None if policy == "All" else self._ended(r)
                self.phases[r.rid.name] = ended or "Deleted"

    def _ended(self, r: Replica) -> str | None:
        """Succeeded/Failed if the replica had ended on its own before clean-up removed it."""
        if r.rid.name in self.stopped:
            old = self.old_entries.get(r.rid.name, {}).get("phase")
            return old if old in FINISHED else "Failed"
        if r.pod is not None:
            return ended_on_its_own(r.pod, self.job.kind.main_container)
        old = self.old_entries.get(r.rid.name, {}).get("phase")
        return old if old in FINISHED else None
