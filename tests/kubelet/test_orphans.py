"""After a crash of the kubelet, pods deleted meanwhile have their processes stopped on start."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kube import resources
from localcluster.apiserver import ApiServerConfig, start_apiserver
from localcluster.kubelet.local import start_node
from tests.kubelet.conftest import kill_strays, stray_processes


async def _until(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_processes_of_a_pod_deleted_while_the_kubelet_was_down_are_stopped(
    tmp_path: Path,
) -> None:
    api = await start_apiserver(ApiServerConfig(data_dir=tmp_path))
    try:
        node = await start_node(api.kubeconfig, tmp_path)
        kube = node.kube
        await kube.create_pod(
            "default",
            {
                "metadata": {"name": "orphan"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "command": ["sh", "-c", "while true; do sleep 0.05; done"],
                        }
                    ]
                },
            },
        )

        async def running() -> bool:
            pod = await kube.get_pod("default", "orphan")
            return (pod or {}).get("status", {}).get("phase") == "Running"

        await _until(running)
        uid = (await kube.get_pod("default", "orphan"))["metadata"]["uid"]  # type: ignore[index]
        # A crash: the node's tasks die, its pod processes (under their shims) do not.
        node.leader.cancel()
        tasks = [*node.kubelet._tasks, node.scheduler._task, *node.deployments._tasks]
        tasks += [w.task for w in node.kubelet.workers.values()]
        for task in tasks:
            if task is not None:
                task.cancel()
        await node.kubelet.logs.stop()
        assert stray_processes(tmp_path / "pods" / uid)
        # Meanwhile the pod is force-deleted from the API server.
        await kube.client.delete(resources.PODS, "orphan", "default", grace_period_seconds=0)
        await _until(lambda: _absent(kube))
        await kube.close()

        second = await start_node(api.kubeconfig, tmp_path)
        try:

            async def cleaned() -> bool:
                return (
                    not stray_processes(tmp_path / "pods" / uid)
                    and not (tmp_path / "pods" / uid).exists()
                )

            await _until(cleaned)
        finally:
            await second.stop()
    finally:
        await api.stop()
        kill_strays(tmp_path)


async def _absent(kube) -> bool:
    return await kube.get_pod("default", "orphan") is None
