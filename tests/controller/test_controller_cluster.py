"""The controller against an API server, with the test playing the kubelet through the API.

Each test creates a job in a fresh namespace, drives its pods' phases and exit codes the way a
kubelet would report them, and checks what the controller did: children, restarts, status,
events. No mocks: the real controller, client runtime and API server over loopback.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from controller import labels
from controller.manager import Controller, ControllerSettings
from controller.replicas import Mode, pod_body
from controller.spec import view
from kube import resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.controller.conftest import job_status, new_pod, pods_of, wait_phase
from tests.support.cluster import aeventually
from tests.support.fakekubelet import pod_status, set_pod_status
from tests.support.jobs import replica, tf_job, xgb_job

TF = resources.TFJOBS
XGB = resources.XGBJOBS


def _in(namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["metadata"]["namespace"] = namespace
    return job


def _command(job: dict[str, Any], rtype: str, command: list[str]) -> dict[str, Any]:
    for spec in job["spec"]["replicaSpecs"]:
        if spec["type"] == rtype:
            spec["template"]["spec"]["containers"][0]["command"] = command
    return job


async def _wait_pods(client: Client, namespace: str, job: str, names: set[str]) -> dict[str, Any]:
    async def check() -> tuple[dict[str, Any]] | bool:
        pods = await pods_of(client, namespace, job)
        live = {n: p for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")}
        return (live,) if set(live) == names else False  # `{}` is an answer: wrapped

    (found,) = await aeventually(check, timeout=15)
    return found


async def test_a_tensorflow_job_gets_a_pod_and_headless_service_per_replica_with_tf_config(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = _in(namespace, tf_job(replica("chief"), replica("worker", 2), replica("ps"), name="tf"))
    await kclient.create(TF, job)
    names = {"tf-chief-0", "tf-worker-0", "tf-worker-1", "tf-ps-0"}
    pods = await _wait_pods(kclient, namespace, "tf", names)

    async def services() -> dict[str, Any] | bool:
        body = await kclient.list(
            resources.SERVICES, namespace, label_selector="batch.tensorstack.dev/job-name=tf"
        )
        found = {s["metadata"]["name"]: s for s in body["items"]}
        return found if set(found) == names else False

    svcs = await aeventually(services, timeout=15)
    assert all(s["spec"]["clusterIP"] == "None" for s in svcs.values())
    assert svcs["tf-worker-1"]["spec"]["ports"][0]["port"] == 2222
    assert svcs["tf-worker-1"]["spec"]["selector"]["batch.tensorstack.dev/replica-index"] == "1"

    worker = pods["tf-worker-1"]
    assert worker["spec"]["restartPolicy"] == "Never"
    owner = worker["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "TensorFlowTrainingJob",
        "tf",
        True,
        True,
    )
    assert pods["tf-chief-0"]["metadata"]["labels"]["batch.tensorstack.dev/job-role"] == "master"
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0].get("env") or []}
    tf_config = json.loads(env["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert tf_config["cluster"]["worker"] == [
        f"tf-worker-0.{namespace}.svc:2222",
        f"tf-worker-1.{namespace}.svc:2222",
    ]
    assert tf_config["cluster"]["chief"] == [f"tf-chief-0.{namespace}.svc:2222"]

    status = await wait_phase(kclient, TF, namespace, "tf", "Pending")
    assert status["aggregate"]["running"] == 0
    assert {t["type"] for t in status["tasks"]} == {"chief", "worker", "ps"}


async def test_the_job_succeeds_with_its_master_and_unfinished_replicas_are_cleaned_up(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = _in(namespace, tf_job(replica("worker", 2), replica("ps"), name="ok"))
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "Unfinished"}
    await kclient.create(TF, job)
    names = {"ok-worker-0", "ok-worker-1", "ok-ps-0"}
    await _wait_pods(kclient, namespace, "ok", names)
    for name in names:
        await set_pod_status(kclient, namespace, name, "Running")
    running = await wait_phase(kclient, TF, namespace, "ok", "Running")
    assert running["aggregate"]["running"] == 3
    await set_pod_status(kclient, namespace, "ok-worker-1", "Succeeded", 0)
    await set_pod_status(kclient, namespace, "ok-worker-0", "Succeeded", 0)  # the master

    done = await wait_phase(kclient, TF, namespace, "ok", "Succeeded")
    assert done["completionTime"]
    completed = {c["type"]: c for c in done["conditions"]}["Completed"]
    assert completed["status"] == "True"
    # Unfinished: the parameter server, still running, is deleted; the finished workers stay.
    await _wait_pods(kclient, namespace, "ok", {"ok-worker-0", "ok-worker-1"})

    async def events() -> list[dict[str, Any]] | bool:
        body = await kclient.list(resources.EVENTS, namespace)
        found = [e for e in body["items"] if e["involvedObject"]["name"] == "ok"]
        return found if any(e["type"] == "Normal" for e in found) else False

    recorded = await aeventually(events, timeout=10)
    assert any("ok-worker-0" in e["message"] for e in recorded)


async def test_a_failing_master_runs_backoff_limit_plus_one_times_then_the_job_fails(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = _in(namespace, tf_job(replica("worker", 1, restartPolicy="OnFailure"), name="bo"))
    job["spec"]["runPolicy"] = {"backoffLimit": 2}
    await kclient.create(TF, job)
    uid = ""
    runs = 0
    for _ in range(3):
        pod = await new_pod(kclient, namespace, "bo-worker-0", uid)
        uid = pod["metadata"]["uid"]
        runs += 1
        await set_pod_status(kclient, namespace, "bo-worker-0", "Failed", 3)
    failed = await wait_phase(kclient, TF, namespace, "bo", "Failed")
    assert runs == 3
    assert failed["backoffCount"] == 2
    reasons = {c["type"]: c.get("reason") for c in failed["conditions"] if c["status"] == "True"}
    assert "Failed" in reasons
    # No fourth run.
    pods = await pods_of(kclient, namespace, "bo")
    assert pods["bo-worker-0"]["metadata"]["uid"] == uid


async def _fail_long_ago(client: Client, namespace: str, name: str, code: int) -> None:
    """The kubelet's report of a pod that failed a minute ago: its crash-loop delay (1 s before
    a first restart) has passed by the time the controller sees it, as when it runs behind."""
    pod = await client.get(resources.PODS, name, namespace)
    status = pod_status(pod, "Failed", code)
    ago = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for container in status["containerStatuses"]:
        container["state"]["terminated"]["finishedAt"] = ago
    pod["status"] = status
    await client.replace(resources.PODS, pod, namespace, subresource="status")


async def test_a_restart_before_the_jobs_first_status_is_counted(
    kclient: Client, namespace: str
) -> None:
    """A job's first reconcile creates its pods and leaves the status to the next one. When a
    reconcile that finds no status already restarts a replica — here the pod's controller
    stopped before any status and a new one starts after the pod failed; under load the same
    happens when the reconcile after the first comes late — the count must be stored before the
    pod is deleted, or it is lost with it and the job runs more often than its backoff limit
    allows (seen in `trainops up` under load: 4 runs with backoffLimit 2)."""
    job = _in(namespace, tf_job(replica("worker", 1, restartPolicy="OnFailure"), name="early"))
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    created = await kclient.create(TF, job)
    job_view = view(created)
    (rid,) = job_view.replicas()
    pod = await kclient.create(
        resources.PODS, pod_body(job_view, rid, restart_count=0, mode=Mode.TRAIN), namespace
    )
    await _fail_long_ago(kclient, namespace, rid.name, 3)
    assert await job_status(kclient, TF, namespace, "early") == {}

    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    Controller(manager, ControllerSettings(workers=2, resync_seconds=30))
    manager.start()
    try:
        second = await new_pod(kclient, namespace, rid.name, pod["metadata"]["uid"])
        assert second["metadata"]["annotations"][labels.RESTART_COUNT] == "1"
        await _fail_long_ago(kclient, namespace, rid.name, 3)
        failed = await wait_phase(kclient, TF, namespace, "early", "Failed")
    finally:
        await manager.stop()
    assert failed["backoffCount"] == 1
    reasons = {c["type"]: c.get("reason") for c in failed["conditions"] if c["status"] == "True"}
    assert reasons["Failed"] == "BackoffLimitExceeded"
    pods = await pods_of(kclient, namespace, "early")
    assert pods[rid.name]["metadata"]["uid"] == second["metadata"]["uid"]  # no third run


async def test_a_pod_deleted_by_hand_is_recreated_without_using_backoff(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    await kclient.create(TF, _in(namespace, tf_job(replica("worker", 1), name="hand")))
    pods = await _wait_pods(kclient, namespace, "hand", {"hand-worker-0"})
    old = pods["hand-worker-0"]["metadata"]["uid"]
    await kclient.delete(resources.PODS, "hand-worker-0", namespace, grace_period_seconds=0)
    await new_pod(kclient, namespace, "hand-worker-0", old)
    status = await job_status(kclient, TF, namespace, "hand")
    assert status.get("backoffCount", 0) == 0


async def test_the_deadline_fails_a_running_job_without_any_event_to_trigger_it(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = _in(namespace, tf_job(replica("worker", 1), name="late"))
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 2, "cleanUpPolicy": "None"}
    await kclient.create(TF, job)
    await _wait_pods(kclient, namespace, "late", {"late-worker-0"})
    await set_pod_status(kclient, namespace, "late-worker-0", "Running")
    failed = await wait_phase(kclient, TF, namespace, "late", "Failed", timeout=10)
    condition = {c["type"]: c for c in failed["conditions"]}["Failed"]
    assert condition["reason"] == "DeadlineExceeded"
    # A deadline stops the work: the running replica is deleted whatever the clean-up policy.
    await _wait_pods(kclient, namespace, "late", set())


async def test_pausing_deletes_the_replicas_and_resuming_recreates_them(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = _in(namespace, tf_job(replica("worker", 2), name="nap"))
    job["spec"]["runMode"] = {
        "pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["resumed"]}]}
    }
    await kclient.create(TF, job)
    names = {"nap-worker-0", "nap-worker-1"}
    await _wait_pods(kclient, namespace, "nap", names)
    pause = {"spec": {"runMode": {"pause": {"enabled": True}}}}
    await kclient.patch(TF, "nap", pause, namespace, patch_type="merge")
    paused = await wait_phase(kclient, TF, namespace, "nap", "Paused")
    assert {c["type"]: c["status"] for c in paused["conditions"]}["Paused"] == "True"
    await _wait_pods(kclient, namespace, "nap", set())

    resume = {"spec": {"runMode": {"pause": {"enabled": False}}}}
    await kclient.patch(TF, "nap", resume, namespace, patch_type="merge")
    pods = await _wait_pods(kclient, namespace, "nap", names)
    assert pods["nap-worker-1"]["spec"]["containers"][0]["command"] == ["resumed"]
    await wait_phase(kclient, TF, namespace, "nap", "Resuming")
    for name in names:
        await set_pod_status(kclient, namespace, name, "Running")
    resumed = await wait_phase(kclient, TF, namespace, "nap", "Running")
    assert resumed.get("backoffCount", 0) == 0


async def test_an_xgboost_job_gets_its_rank_and_world_size(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    await kclient.create(XGB, _in(namespace, xgb_job(name="xg")))
    pods = await _wait_pods(kclient, namespace, "xg", {"xg-master-0", "xg-worker-0", "xg-worker-1"})

    def env(pod: str) -> dict[str, str]:
        container = pods[pod]["spec"]["containers"][0]
        return {e["name"]: e.get("value", "") for e in container.get("env") or []}

    assert env("xg-master-0")["RANK"] == "0"
    assert env("xg-worker-1")["RANK"] == "2"
    assert env("xg-worker-1")["WORLD_SIZE"] == "3"
    assert env("xg-worker-0")["MASTER_ADDR"] == "xg-master-0"
    assert env("xg-worker-0")["MASTER_PORT"] == "9999"
    await set_pod_status(kclient, namespace, "xg-master-0", "Failed", 1)
    failed = await wait_phase(kclient, XGB, namespace, "xg", "Failed")
    assert failed.get("backoffCount", 0) == 0


async def test_deleting_the_job_removes_its_pods_and_services(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    await kclient.create(TF, _in(namespace, tf_job(replica("worker", 2), name="gone")))
    await _wait_pods(kclient, namespace, "gone", {"gone-worker-0", "gone-worker-1"})
    await kclient.delete(TF, "gone", namespace, propagation_policy="Foreground")
    await _wait_pods(kclient, namespace, "gone", set())

    async def no_services() -> bool:
        body = await kclient.list(
            resources.SERVICES, namespace, label_selector="batch.tensorstack.dev/job-name=gone"
        )
        return not body["items"]

    await aeventually(no_services, timeout=15)


async def test_a_child_the_api_server_refuses_becomes_a_warning_event_on_the_job(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    """Without the webhook (it would deny the name), a 54-character job with a TensorBoard is
    stored; `<job>-tensorboard` is then too long for a Service. The refusal is reported on the
    job (FailedCreate), not retried forever."""
    name = "t" * 54
    job = _in(namespace, tf_job(replica("worker", 1), name=name))
    job["spec"]["tensorboardSpec"] = {
        "image": "t9kpublic/tensorboard:2.11.0",
        "trainingLogFilesets": ["t9k://pvc/logs/run"],
    }
    await kclient.create(TF, job)

    async def failed_create() -> dict[str, Any] | bool:
        body = await kclient.list(resources.EVENTS, namespace)
        found = [
            e
            for e in body["items"]
            if e["involvedObject"]["name"] == name and e["reason"] == "FailedCreate"
        ]
        return found[0] if found else False

    event = await aeventually(failed_create, timeout=15)
    assert event["type"] == "Warning"
    assert f"{name}-tensorboard" in event["message"]
    assert "must be no more than 63 characters" in event["message"]
    # The replicas themselves still run.
    await _wait_pods(kclient, namespace, name, {f"{name}-worker-0"})
