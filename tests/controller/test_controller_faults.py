"""The controller under faults: killed mid-work, two replicas racing, and what it reports.

`trainops controller` runs as a real process against the session's API server, so SIGKILL is a
real crash; the test plays the kubelet through the API where pods must run.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from controller.manager import Controller, ControllerSettings
from kube import resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.controller.conftest import pods_of, wait_phase
from tests.support.cluster import Cluster, aeventually
from tests.support.fakekubelet import set_pod_status
from tests.support.jobs import replica, tf_job

TF = resources.TFJOBS


class ControllerProcess:
    """`trainops controller` as a subprocess; `port` once it serves /metrics."""

    def __init__(self, kubeconfig: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainops",
                "controller",
                "--kubeconfig",
                kubeconfig,
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                *extra,
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._port = threading.Event()
        self.port = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"/readyz on 127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                self._port.set()

    def wait_port(self, timeout: float = 20) -> int:
        assert self._port.wait(timeout), "".join(self.lines)
        return self.port

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


@pytest.fixture
def spawn(cluster: Cluster, crds: None) -> Iterator[Callable[..., ControllerProcess]]:
    started: list[ControllerProcess] = []

    def start(*extra: str) -> ControllerProcess:
        process = ControllerProcess(str(cluster.kubeconfig), *extra)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(signal.SIGKILL)


def _job(namespace: str, name: str) -> dict[str, Any]:
    job = tf_job(replica("chief"), replica("worker", 2), replica("ps"), name=name)
    job["metadata"]["namespace"] = namespace
    return job


async def test_a_controller_killed_mid_work_converges_after_a_restart_without_duplicates(
    spawn: Callable[..., ControllerProcess], kclient: Client, namespace: str
) -> None:
    first = spawn("--no-leader-elect", "--workers", "2")
    first.wait_port()
    names = [f"crash-{i:02d}" for i in range(20)]
    await asyncio.gather(*(kclient.create(TF, _job(namespace, n)) for n in names))

    async def some_pods() -> bool:
        body = await kclient.list(resources.PODS, namespace)
        return len(body["items"]) >= 4

    await aeventually(some_pods, timeout=20)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    second = spawn("--no-leader-elect", "--workers", "2")
    second.wait_port()

    async def converged() -> bool:
        body = await kclient.list(resources.PODS, namespace)
        pods = [p["metadata"]["name"] for p in body["items"]]
        if len(pods) != 4 * len(names):
            return False
        jobs = await kclient.list(TF, namespace)
        return all(
            (j.get("status") or {}).get("aggregate", {}).get("creating") == 0
            and (j.get("status") or {}).get("phase") == "Pending"
            for j in jobs["items"]
        )

    await aeventually(converged, timeout=60)
    body = await kclient.list(resources.PODS, namespace)
    pods = body["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(
        f"{n}-{t}" for n in names for t in ("chief-0", "worker-0", "worker-1", "ps-0")
    )
    assert {p["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] for p in pods} == {
        "0"
    }
    second.stop()


async def test_the_controller_serves_readiness_and_metrics(
    spawn: Callable[..., ControllerProcess], kclient: Client, namespace: str
) -> None:
    process = spawn("--no-leader-elect")
    port = process.wait_port()
    await kclient.create(TF, _job(namespace, "metered"))
    await aeventually(lambda: _pods_exist(kclient, namespace, "metered"), timeout=20)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:

        async def ready() -> bool:
            async with http.get("/readyz") as r:
                return r.status == 200 and await r.text() == "ok"

        await aeventually(ready, timeout=20)
        async with http.get("/healthz") as r:
            assert r.status == 200

        async def reconciled() -> bool:
            # The pods exist before the reconcile that created them ends (it writes the
            # job's first status after the creates): wait for the counter, not the pods.
            async with http.get("/metrics") as r:
                metrics.append(await r.text())
            return (
                re.search(
                    r'^trainops_controller_jobs\{kind="TensorFlowTrainingJob",phase="Pending"\} '
                    r"[1-9]",
                    metrics[-1],
                    re.M,
                )
                is not None
            )

        metrics: list[str] = []
        await aeventually(reconciled, timeout=20)
        text = metrics[-1]
    reconciles = re.findall(
        r'^trainops_controller_reconciles_total\{kind="TensorFlowTrainingJob",result="(\w+)"\} '
        r"(\S+)$",
        text,
        re.M,
    )
    assert reconciles and sum(float(v) for _, v in reconciles) >= 1
    assert re.search(
        r'^trainops_controller_jobs\{kind="TensorFlowTrainingJob",phase="Pending"\} [1-9]',
        text,
        re.M,
    )
    assert "trainops_controller_workqueue_depth" in text
    assert 'trainops_controller_actions_total{kind="Pod",verb="create"}' in text
    assert process.stop() == 0
    assert not any("Traceback" in line for line in process.lines), "".join(process.lines)


async def _pods_exist(client: Client, namespace: str, job: str) -> bool:
    return len(await pods_of(client, namespace, job)) == 4


@pytest.fixture
async def two_controllers(
    cluster: Cluster, crds: None, namespace: str
) -> AsyncIterator[list[Controller]]:
    clients = [await Client.connect(cluster.kubeconfig) for _ in range(2)]
    elections = [
        LeaderElection(
            namespace=namespace,
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.2,
            identity=f"controller-{i}",
        )
        for i in range(2)
    ]
    managers = [Manager(c, leader_election=e) for c, e in zip(clients, elections, strict=True)]
    controllers = [Controller(m, ControllerSettings(workers=2)) for m in managers]
    for m in managers:
        m.start()
    try:
        yield controllers
    finally:
        for m in managers:
            await m.stop()
        for client in clients:
            await client.close()


async def test_two_controllers_elect_one_leader_and_the_standby_takes_over_when_it_stops(
    two_controllers: list[Controller], kclient: Client, namespace: str
) -> None:
    async def one_leader() -> Controller | bool:
        leaders = [c for c in two_controllers if c.is_leader]
        return leaders[0] if len(leaders) == 1 else False

    leader = await aeventually(one_leader, timeout=10)
    await kclient.create(TF, _job(namespace, "led"))
    await aeventually(lambda: _pods_exist(kclient, namespace, "led"), timeout=20)
    standby = next(c for c in two_controllers if c is not leader)
    assert not standby.is_leader
    await leader.manager.stop()  # releases the lease: the standby need not wait for it to expire

    async def took_over() -> bool:
        return standby.is_leader

    await aeventually(took_over, timeout=3)
    await kclient.create(TF, _job(namespace, "after"))
    await aeventually(lambda: _pods_exist(kclient, namespace, "after"), timeout=20)
    for name in ("after-chief-0", "after-worker-0", "after-worker-1", "after-ps-0"):
        await set_pod_status(kclient, namespace, name, "Running")
    await wait_phase(kclient, TF, namespace, "after", "Running")
