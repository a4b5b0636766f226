"""Fixtures for the controller against an API server: CRDs, a client, a running controller.

The controller runs in the test's event loop against the session's embedded API server (or a
real cluster with `TRAINOPS_TEST_KUBECONFIG`); there is no kubelet, so tests play it through
the API (`tests.support.fakekubelet`) and decide exactly when each replica runs and how it
exits.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller.manager import Controller, ControllerSettings
from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.support.cluster import Cluster, aeventually

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (it installs the CRDs)")
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=trainops-tests",
        "-f",
        str(ROOT / "deploy" / "crds"),
    )
    cluster.wait_established(
        "tensorflowtrainingjobs.batch.tensorstack.dev", "xgboosttrainingjobs.batch.tensorstack.dev"
    )


@pytest.fixture
async def kclient(cluster: Cluster, crds: None) -> AsyncIterator[Client]:
    client = await Client.connect(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def running_controller(
    kclient: Client, settings: ControllerSettings
) -> AsyncIterator[Controller]:
    """A Controller with `settings` on its own Manager (no leader election), synced."""
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    running = Controller(manager, settings)
    manager.start()
    try:
        await running.wait_synced(timeout=20)
        yield running
    finally:
        await manager.stop()


@pytest.fixture
async def controller(kclient: Client) -> AsyncIterator[Controller]:
    async with running_controller(kclient, ControllerSettings(workers=2, resync_seconds=30)) as c:
        yield c


async def pods_of(client: Client, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    """The job's replica pods (not its TensorBoard's, which a real Deployment controller makes)."""
    body = await client.list(
        resources.PODS,
        namespace,
        label_selector=f"batch.tensorstack.dev/job-name={job},batch.tensorstack.dev/replica-type",
    )
    return {p["metadata"]["name"]: p for p in body.get("items") or []}


async def job_status(client: Client, resource: Any, namespace: str, name: str) -> dict[str, Any]:
    try:
        job = await client.get(resource, name, namespace)
    except errors.NotFound:
        return {}
    return dict(job.get("status") or {})


async def wait_phase(
    client: Client, resource: Any, namespace: str, name: str, phase: str, timeout: float = 15
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | bool:
        status = await job_status(client, resource, namespace, name)
        return status if status.get("phase") == phase else False

    result: dict[str, Any] = await aeventually(check, timeout=timeout)
    return result


# `trainops up` as a user runs it (one per test module), and kubectl against it.
from tests.up.conftest import kubectl, running_up, up  # noqa: E402, F401


async def new_pod(
    client: Client, namespace: str, name: str, not_uid: str = "", timeout: float = 20
) -> dict[str, Any]:
    """Pod `name` of its job once it exists with a uid other than `not_uid` (a recreated one)."""

    async def check() -> dict[str, Any] | bool:
        pods = await pods_of(client, namespace, name.rsplit("-", 2)[0])
        pod = pods.get(name)
        return pod if pod and pod["metadata"]["uid"] != not_uid else False

    found: dict[str, Any] = await aeventually(check, timeout=timeout)
    return found
