"""The kubelet's stop is bounded and leaves nothing running, even a container its pods missed."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from localcluster.apiserver import ApiServerConfig, start_apiserver
from localcluster.kubelet.local import start_node
from localcluster.kubelet.runtime import StartSpec
from tests.kubelet.conftest import kill_strays, stray_processes


async def test_a_container_no_pod_stopped_is_killed_and_named_when_the_kubelet_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = await start_apiserver(ApiServerConfig(data_dir=tmp_path))
    try:
        node = await start_node(api.kubeconfig, tmp_path, shutdown_grace_seconds=2.0)
        runtime = node.kubelet.runtime
        # Started through the runtime but unknown to every pod worker: nothing signals it.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        await runtime.start(
            StartSpec("uid-stray", "c", 0, ["sh", "-c", "sleep 60"], env, str(tmp_path)),
            now="2026-01-01T00:00:00Z",
        )
        deadline = time.monotonic() + 10
        while not (runtime.instance_dir("uid-stray", "c", 0) / "pid.json").exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        with caplog.at_level(logging.WARNING, logger="trainops.kubelet"):
            await asyncio.wait_for(node.stop(), 20)
        assert stray_processes(tmp_path / "pods") == []
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            "stopping: container(s) still running after their pods were ended, killing: "
            "uid uid-stray container c #0"
        ]
    finally:
        await api.stop()
        kill_strays(tmp_path)
