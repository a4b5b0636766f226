"""A worker node lost under a running job, against an API server: Node objects whose Ready
condition the test sets to Unknown (the API server needs no real node for that), pods bound to
them, and the test playing the kubelets (`tests.support.fakekubelet`) until one "dies".

What the cluster does on its own here is what a real one does: a pod bound to an existing node
and deleted gracefully (the taint manager's eviction) stays Terminating until a kubelet
confirms it — which never comes from a lost node."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from controller import labels
from controller.manager import Controller, ControllerSettings
from kube import errors, resources
from kube.client import Client
from tests.controller.conftest import job_status, new_pod, pods_of, running_controller, wait_phase
from tests.support.cluster import aeventually
from tests.support.fakekubelet import set_pod_status
from tests.support.jobs import replica, tf_job

TF = resources.TFJOBS
GRACE = 2.0  # --lost-node-grace for these tests: seconds, not the default minute


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
async def lost_controller(kclient: Client) -> AsyncIterator[Controller]:
    settings = ControllerSettings(workers=2, resync_seconds=30, lost_node_grace=GRACE)
    async with running_controller(kclient, settings) as running:
        yield running


@pytest.fixture
async def nodes(kclient: Client, namespace: str) -> AsyncIterator[tuple[str, str]]:
    """Two Ready nodes named after the test's namespace, deleted afterwards."""
    names = (f"{namespace}-n1"[-63:], f"{namespace}-n2"[-63:])
    for name in names:
        await kclient.create(
            resources.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        )
        await _set_ready(kclient, name, "True")
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(errors.NotFound):
                await kclient.delete(resources.NODES, name)


async def _set_ready(client: Client, node: str, status: str) -> None:
    """What the kubelet (True) or the node lifecycle controller (Unknown) writes."""
    for _ in range(10):
        obj = await client.get(resources.NODES, node)
        reason = "KubeletReady" if status == "True" else "NodeStatusUnknown"
        obj["status"] = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": reason,
                    "lastHeartbeatTime": _now(),
                    "lastTransitionTime": _now(),
                }
            ]
        }
        try:
            await client.replace(resources.NODES, obj, subresource="status")
            return
        except errors.Conflict:
            continue
    raise AssertionError(f"node {node}: status kept conflicting")


async def _bind(client: Client, namespace: str, pod: str, node: str) -> None:
    """The scheduler's binding of `pod` to `node`, then the kubelet reports it Running."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    await client.create(resources.PODS, body, namespace, subresource="binding")
    await set_pod_status(client, namespace, pod, "Running")


def _job(namespace: str, name: str, policy: str) -> dict[str, Any]:
    job = copy.deepcopy(tf_job(replica("worker", 2, restartPolicy=policy), name=name))
    job["metadata"]["namespace"] = namespace
    job["spec"]["runPolicy"] = {"backoffLimit": 3}
    return job


async def _running_on(
    client: Client, namespace: str, job: str, nodes: tuple[str, str]
) -> dict[str, dict[str, Any]]:
    """Both workers bound (worker-i to node i) and Running; the job Running."""
    pods = {}
    for i, node in enumerate(nodes):
        name = f"{job}-worker-{i}"
        pods[name] = await new_pod(client, namespace, name)
        await _bind(client, namespace, name, node)
    await wait_phase(client, TF, namespace, job, "Running", timeout=20)
    return pods


async def _reconciles(controller: Controller) -> float:
    value = 0.0
    for result in ("success", "requeue"):
        sample = controller.metrics.registry.get_sample_value(
            "trainops_controller_reconciles_total",
            {"kind": "TensorFlowTrainingJob", "result": result},
        )
        value += sample or 0.0
    return value


async def _drive(controller: Controller, key: str, times: int) -> None:
    """Reconcile the job `times` more times (through the work queue, as any event would)."""
    for _ in range(times):
        before = await _reconciles(controller)
        controller.queue.add(key)

        async def done(before: float = before) -> bool:
            return await _reconciles(controller) > before

        await aeventually(done, timeout=10)


async def test_a_worker_on_a_lost_node_stuck_terminating_is_replaced_and_counted_once(
    lost_controller: Controller, kclient: Client, namespace: str, nodes: tuple[str, str]
) -> None:
    await kclient.create(TF, _job(namespace, "lost", "OnFailure"))
    pods = await _running_on(kclient, namespace, "lost", nodes)
    old = pods["lost-worker-1"]["metadata"]["uid"]

    # The node stops; the taint manager evicts its pod, which stays Terminating (no kubelet).
    await _set_ready(kclient, nodes[1], "Unknown")
    await kclient.delete(resources.PODS, "lost-worker-1", namespace, grace_period_seconds=30)

    new = await new_pod(kclient, namespace, "lost-worker-1", not_uid=old)
    assert new["metadata"]["annotations"][labels.RESTART_COUNT] == "1"
    assert not (new.get("spec") or {}).get("nodeName")  # a new pod, for the scheduler
    status = await job_status(kclient, TF, namespace, "lost")
    assert status["phase"] == "Running"
    assert status["backoffCount"] == 1
    (worker,) = [t for t in status["tasks"] if t["type"] == "worker"]
    counts = {r["name"]: r["restartCount"] for r in worker["replicas"]}
    assert counts == {"lost-worker-0": 0, "lost-worker-1": 1}

    # The lost node stays lost and the job is reconciled again and again: counted once.
    await _drive(lost_controller, f"TensorFlowTrainingJob/{namespace}/lost", 5)
    again = await job_status(kclient, TF, namespace, "lost")
    assert again["backoffCount"] == 1
    current = await pods_of(kclient, namespace, "lost")
    assert current["lost-worker-1"]["metadata"]["uid"] == new["metadata"]["uid"]

    events = await kclient.list(resources.EVENTS, namespace)
    restarts = [e["message"] for e in events["items"] if e.get("reason") == "ReplicaRestart"]
    assert len(restarts) == 1
    assert f"restarting pod lost-worker-1 after its node {nodes[1]} was lost" in restarts[0]

    # It runs on the node left, and the job finishes.
    await _bind(kclient, namespace, "lost-worker-1", nodes[0])
    await set_pod_status(kclient, namespace, "lost-worker-0", "Succeeded", 0)
    done = await wait_phase(kclient, TF, namespace, "lost", "Succeeded", timeout=20)
    assert done["backoffCount"] == 1


async def test_under_never_a_lost_worker_fails_the_job_naming_its_node_and_pod(
    lost_controller: Controller, kclient: Client, namespace: str, nodes: tuple[str, str]
) -> None:
    await kclient.create(TF, _job(namespace, "never", "Never"))
    await _running_on(kclient, namespace, "never", nodes)
    await _set_ready(kclient, nodes[1], "Unknown")

    failed = await wait_phase(kclient, TF, namespace, "never", "Failed", timeout=20)
    (cond,) = [c for c in failed["conditions"] if c["type"] == "Failed"]
    assert cond["status"] == "True"
    assert cond["reason"] == "NodeLost"
    assert f"pod never-worker-1 cannot go on: its node {nodes[1]} was lost" in cond["message"]
    assert failed["backoffCount"] == 0

    # Nothing is left waiting on the lost node: its pod is gone (clean-up, forced).
    async def gone() -> bool:
        return "never-worker-1" not in await pods_of(kclient, namespace, "never")

    await aeventually(gone, timeout=20)
