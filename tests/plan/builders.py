"""Builders for the planning tests: jobs, pods in a given state, and a tiny simulated world.

`World` holds a job and its children and plays the shell's part: `step()` plans, stores the
returned status on the job (written first, as the shell does) and applies the actions (a create
adds the object with a fresh uid, a delete with a matching uid removes it). Tests then move pods
along (`run`, `exit`, `disrupt`) and step again — so sequences (restarts, pause/resume) read
like a story. The world has a clock (`now`, starting at `T0`): `tick(seconds)` advances it,
`step(at(…))` moves it to that time, and an exit is stamped with it (`finishedAt`), which is
what the crash-loop delay counts from.
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.plan import Plan, plan
from tests.support.jobs import replica, tf_job

T0 = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
MAIN = {"TensorFlowTrainingJob": "tensorflow", "XGBoostTrainingJob": "xgboost"}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def tf(*replicas: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A TensorFlowTrainingJob with a uid and a generation (default: chief + 2 workers)."""
    job = tf_job(*replicas, **spec)
    job["metadata"].update(uid="job-uid", generation=1)
    return job


def workers(n: int = 1, policy: str = "Never", **spec: Any) -> dict[str, Any]:
    """A TensorFlow job with only workers (worker-0 is the master)."""
    return tf(replica("worker", n, restartPolicy=policy), **spec)


def xgb(workers: int = 2, policy: str = "Never", **spec: Any) -> dict[str, Any]:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "XGBoostTrainingJob",
        "metadata": {"name": "boost", "namespace": "demo", "uid": "job-uid", "generation": 1},
        "spec": {
            "replicaSpecs": [
                replica("master", 1, main="xgboost", restartPolicy=policy),
                replica("worker", workers, main="xgboost", restartPolicy=policy),
            ],
            **spec,
        },
    }
    return job


def with_policy(job: dict[str, Any], **policies: str) -> dict[str, Any]:
    """Set the restartPolicy of replica types: `with_policy(job, worker="OnFailure")`."""
    for spec in job["spec"]["replicaSpecs"]:
        if spec["type"] in policies:
            spec["restartPolicy"] = policies[spec["type"]]
    return job


class World:
    """A job and its children, advanced one planning round at a time."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.pods: dict[str, dict[str, Any]] = {}
        self.services: dict[str, dict[str, Any]] = {}
        self.deployment: dict[str, Any] | None = None
        self.main = MAIN[job["kind"]]
        self._uids = itertools.count(1)
        self.created: list[str] = []  # every pod creation, in order (restarts show up here)
        self.now = T0
        self.nodes: dict[str, dict[str, Any]] = {}  # by name (`node`, `place`)
        self.lost_node_grace = 60.0
        self.forced: list[str] = []  # every force-deleted pod, in order

    def tick(self, seconds: float) -> datetime:
        """Advance the clock."""
        self.now += timedelta(seconds=seconds)
        return self.now

    def _at(self, now: datetime | None) -> datetime:
        if now is not None:
            self.now = now
        return self.now

    def plan(self, now: datetime | None = None) -> Plan:
        return plan(
            copy.deepcopy(self.job),
            [copy.deepcopy(p) for p in self.pods.values()],
            [copy.deepcopy(s) for s in self.services.values()],
            self._at(now),
            tensorboard=copy.deepcopy(self.deployment),
            nodes=copy.deepcopy(self.nodes),
            lost_node_grace=self.lost_node_grace,
        )

    def step(self, now: datetime | None = None, *, act: bool = True) -> Plan:
        result = self.plan(now)
        self.job["status"] = copy.deepcopy(result.status)
        if act:
            self.apply(result)
        return result

    def apply(self, result: Plan) -> None:
        for a in result.actions:
            store: dict[str, dict[str, Any]]
            if a.kind == "Deployment":
                if a.verb == "create":
                    self.deployment = self._new(a.body)
                elif a.verb == "update":
                    if self.deployment and self.deployment["metadata"]["uid"] == a.uid:
                        self.deployment = copy.deepcopy(a.body)
                elif self.deployment and self.deployment["metadata"]["uid"] == a.uid:
                    self.deployment = None
                continue
            store = self.pods if a.kind == "Pod" else self.services
            if a.verb == "create":
                if a.name not in store:
                    store[a.name] = self._new(a.body)
                    if a.kind == "Pod":
                        store[a.name]["status"] = {"phase": "Pending"}
                        self.created.append(a.name)
            elif a.name in store and store[a.name]["metadata"]["uid"] == a.uid:
                del store[a.name]
                if a.force:
                    self.forced.append(a.name)

    def _new(self, body: dict[str, Any] | None) -> dict[str, Any]:
        obj = copy.deepcopy(body or {})
        obj["metadata"]["uid"] = f"uid-{next(self._uids)}"
        return obj

    # --- moving pods along ----------------------------------------------------------------

    def run(self, *names: str, ready: bool = True) -> None:
        for name in names or tuple(self.pods):
            self.pods[name]["status"] = running_status(self.main, ready=ready)

    def exit(self, name: str, code: int | None) -> None:
        """The pod's main container exits with `code` now (None: the pod is evicted)."""
        self.pods[name]["status"] = exited_status(self.main, code, self.now)

    def disrupt(
        self,
        name: str,
        reason: str = "TerminationByKubelet",
        message: str = "Pod was terminated in response to imminent node shutdown.",
    ) -> None:
        """The kubelet ends the pod (SIGTERM, 143) with a True DisruptionTarget condition."""
        status = exited_status(self.main, 143, self.now)
        status["reason"] = "Terminated"
        status["conditions"] = [
            {"type": "Ready", "status": "False", "lastTransitionTime": stamp(self.now)},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": stamp(self.now),
            },
        ]
        self.pods[name]["status"] = status

    # --- the kubelet restarting a pod's container in place (restartPolicy OnFailure/Always) --

    def _main_status(self, name: str) -> dict[str, Any]:
        status = self.pods[name].setdefault("status", {})
        for cs in status.setdefault("containerStatuses", []):
            if cs["name"] == self.main:
                cs.setdefault("restartCount", 0)
                return dict(cs)
        return {"name": self.main, "restartCount": 0, "state": {}}

    def _set_main(self, name: str, phase: str, cs: dict[str, Any]) -> None:
        status = self.pods[name]["status"]
        status["phase"] = phase
        status["containerStatuses"] = [cs]

    def crash(self, name: str, code: int) -> None:
        """The main container's run ends with `code` now; the pod's own restartPolicy says
        whether the kubelet will restart it (then it waits in CrashLoopBackOff)."""
        cs = self._main_status(name)
        term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
        term["finishedAt"] = stamp(self.now)
        policy = self.pods[name]["spec"]["restartPolicy"]
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
            cs["lastState"] = {"terminated": term}
            self._set_main(name, "Running", cs)
        else:
            cs["state"] = {"terminated": term}
            self._set_main(name, "Succeeded" if code == 0 else "Failed", cs)

    def restart_in_place(self, name: str) -> None:
        """The kubelet starts the container again after its back-off (restartCount + 1)."""
        cs = self._main_status(name)
        cs["restartCount"] += 1
        cs["state"] = {"running": {"startedAt": stamp(self.now)}}
        self._set_main(name, "Running", cs)

    def restart_count(self, name: str) -> int:
        """What `kubectl get pods` shows as RESTARTS."""
        return int(self._main_status(name)["restartCount"])

    def node(self, name: str, ready: str = "True", since: datetime | None = None) -> None:
        """The Node `name` with its Ready condition `ready` since `since` (default: now)."""
        moment = stamp(since or self.now)
        cond = {"type": "Ready", "status": ready, "lastTransitionTime": moment}
        self.nodes[name] = {"metadata": {"name": name}, "status": {"conditions": [cond]}}

    def place(self, pod: str, node: str) -> None:
        """The scheduler bound `pod` to `node` (`spec.nodeName`)."""
        self.pods[pod].setdefault("spec", {})["nodeName"] = node

    def phase(self, name: str, phase: str) -> None:
        self.pods[name]["status"] = {"phase": phase}

    def terminating(self, name: str, grace: int = 30) -> None:
        """Someone asked to delete the pod now, with `grace` seconds (as the API server sets)."""
        meta = self.pods[name]["metadata"]
        meta["deletionTimestamp"] = stamp(self.now + timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace

    def settle(self, now: datetime | None = None) -> Plan:
        """Step until no pod or service is created any more; every new pod runs."""
        result = self.step(now)
        for _ in range(5):
            pending = [n for n, p in self.pods.items() if p["status"]["phase"] == "Pending"]
            if pending:
                self.run(*pending)
            result = self.step()
            if not [a for a in result.actions if a.verb == "create"]:
                return result
        return result


def running_status(main: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": main, "state": {"running": {}}}],
    }


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def exited_status(main: str, code: int | None, now: datetime = T0) -> dict[str, Any]:
    if code is None:
        return {
            "phase": "Failed",
            "reason": "Evicted",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp(now)}],
        }
    state = {"terminated": {"exitCode": code, "finishedAt": stamp(now)}}
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [{"name": main, "state": state}],
    }


def condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def replica_status(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for t in status["tasks"] for r in t["replicas"] if r["name"] == name)


def verbs(result: Plan) -> list[tuple[str, str, str]]:
    return [(a.verb, a.kind, a.name) for a in result.actions]
