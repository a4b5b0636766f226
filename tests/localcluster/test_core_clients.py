"""The other ways in: the `trainops apiserver` command and the kubernetes_asyncio client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import urllib3
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch

from tests.support.cluster import Cluster, eventually

REPO = Path(__file__).resolve().parents[2]


def test_the_apiserver_command_serves_until_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        eventually(
            lambda: (tmp_path / "kubeconfig").exists() and (tmp_path / "server.json").exists(),
            timeout=30,
        )
        port = json.loads((tmp_path / "server.json").read_text())["port"]
        pool = urllib3.PoolManager(
            cert_reqs="CERT_REQUIRED", ca_certs=str(tmp_path / "pki" / "ca.crt")
        )
        token = (tmp_path / "token").read_text().strip()
        reply = eventually(
            lambda: pool.request(
                "GET",
                f"https://127.0.0.1:{port}/api/v1/namespaces/default",
                headers={"Authorization": f"Bearer {token}"},
            ),
            timeout=30,
        )
        assert json.loads(reply.data)["metadata"]["name"] == "default"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, proc.stderr.read() if proc.stderr else ""


async def test_kubernetes_asyncio_creates_lists_and_watches(
    cluster: Cluster, namespace: str
) -> None:
    api = await cluster.async_api_client()
    try:
        core = aclient.CoreV1Api(api)
        start = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
        await core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "async-cm"}, "data": {"a": "1"}}
        )
        listed = await core.list_namespaced_config_map(namespace, label_selector="")
        assert "async-cm" in [i.metadata.name for i in listed.items]
        events = []
        async with awatch.Watch().stream(
            core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=5
        ) as stream:
            async for event in stream:
                events.append((event["type"], event["object"].metadata.name))
                break
        assert events == [("ADDED", "async-cm")]
    finally:
        await api.close()
