"""A network per pod: own IP from the node's pod CIDR, Service names resolve, namespaces cleaned up.

These run real network namespaces, the real CNI plugins and bind mounts, so they need root (or
CAP_NET_ADMIN + CAP_SYS_ADMIN) and the plugins; elsewhere they are skipped with the reason the
node itself would give. Traffic goes only between the pods these tests create and the node.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kube import resources
from localcluster.apiserver import ApiServerConfig, start_apiserver
from localcluster.kubelet import netns, podnet
from localcluster.kubelet.local import RunningNode, start_node
from localcluster.kubelet.model import BackOffPolicy
from tests.kubelet.conftest import kill_strays

_DECISION = podnet.decide(netns.read_facts())
pytestmark = pytest.mark.skipif(not _DECISION.pod_network, reason=_DECISION.reason)

PY = sys.executable

SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 2222))
s.listen()
got = 0
while got < 5:  # the readiness probe's connections say nothing
    c, addr = s.accept()
    text = c.recv(200).decode()
    c.close()
    if text:
        print("got", text, "from", addr[0], flush=True)
        got += 1
"""

# Binds the same port as the server (its own network: no collision), then reaches the server by
# every name a cluster's DNS answers; the server is in the Service only once it is ready.
CLIENT = """
import socket, time
mine = socket.socket()
mine.bind(("0.0.0.0", 2222))
print("hostname", socket.gethostname(), flush=True)
names = ["ps", "ps.{ns}", "ps.{ns}.svc", "ps.{ns}.svc.cluster.local",
         "box.ps.{ns}.svc.cluster.local"]
for name in names:
    deadline = time.monotonic() + 30
    while True:
        try:
            c = socket.create_connection((name, 2222), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    c.sendall(name.encode())
    c.close()
print("done", flush=True)
"""


async def _until(check: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def _ours(node: RunningNode) -> tuple[list[str], bool]:
    """(this node's network namespaces, whether its bridge exists)."""
    names = node.kubelet.network.names
    spaces = [n for n in os.listdir(netns.NETNS_DIR) if podnet.uid_of(names, n) is not None]
    return spaces, os.path.exists(f"/sys/class/net/{names.bridge}")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    api = await start_apiserver(ApiServerConfig(data_dir=tmp_path))
    try:
        yield api, tmp_path
    finally:
        await api.stop()
        kill_strays(tmp_path)


def _pod(name: str, script: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "python",
                    "command": [PY, "-u", "-c", script],
                    "ports": [{"containerPort": 2222}],
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


async def _log(node: RunningNode, pod: dict[str, Any]) -> str:
    uid = pod["metadata"]["uid"]
    path = node.kubelet.runtime.log_path(uid, "main", 0)
    return await asyncio.to_thread(lambda: path.read_text() if path.exists() else "")


async def test_two_pods_on_one_port_reach_each_other_by_service_name(cluster) -> None:
    api, data_dir = cluster
    node = await start_node(api.kubeconfig, data_dir, backoff=BackOffPolicy(initial=0.2))
    kube = node.kube
    try:
        ns = "default"
        await kube.client.create(
            resources.SERVICES,
            {
                "metadata": {"name": "ps", "namespace": ns},
                "spec": {
                    "clusterIP": "None",
                    "selector": {"role": "ps"},
                    "ports": [{"port": 2222}],
                },
            },
            namespace=ns,
        )
        # An exec probe runs in the pod's namespaces: its hostname, its own 127.0.0.1.
        check = "import socket; assert socket.gethostname() == 'box'; " + (
            "socket.create_connection(('127.0.0.1', 2222), timeout=1)"
        )
        ready_probe = {"exec": {"command": [PY, "-c", check]}, "periodSeconds": 1}
        await kube.create_pod(
            ns,
            _pod(
                "ps-0",
                SERVER,
                {"role": "ps"},
                hostname="box",
                subdomain="ps",
                container={"readinessProbe": ready_probe},
            ),
        )
        await kube.create_pod(ns, _pod("worker-0", CLIENT.format(ns=ns), {"role": "worker"}))

        async def phase(name: str) -> dict[str, Any] | None:
            pod = await kube.get_pod(ns, name)
            return pod if (pod or {}).get("status", {}).get("phase") == "Succeeded" else None

        server = await _until(lambda: phase("ps-0"))
        client = await _until(lambda: phase("worker-0"))

        cidr = ipaddress.ip_network(node.kubelet.network.cidr)
        node_obj = await kube.client.get(resources.NODES, node.node_name)
        assert node_obj["spec"]["podCIDR"] == str(cidr)
        server_ip, client_ip = server["status"]["podIP"], client["status"]["podIP"]
        assert server_ip != client_ip
        assert {ipaddress.ip_address(server_ip), ipaddress.ip_address(client_ip)} <= set(cidr)
        assert client["status"]["podIPs"] == [{"ip": client_ip}]

        client_log = await _log(node, client)
        assert "hostname worker-0" in client_log and "done" in client_log
        server_log = await _log(node, server)
        for name in ["ps", f"ps.{ns}", f"ps.{ns}.svc", f"ps.{ns}.svc.cluster.local"]:
            assert f"got {name} from {client_ip}" in server_log
        assert f"got box.ps.{ns}.svc.cluster.local from {client_ip}" in server_log

        # Deleting the pods removes their namespaces, veths and (the last one) the bridge.
        for name in ("ps-0", "worker-0"):
            await kube.client.delete(resources.PODS, name, ns)

        async def clean() -> bool:
            spaces, bridge = await asyncio.to_thread(_ours, node)
            return not spaces and not bridge

        await _until(clean)
    finally:
        await node.stop()
    assert _ours(node) == ([], False)


async def test_a_service_created_later_resolves_in_running_pods(cluster) -> None:
    api, data_dir = cluster
    node = await start_node(api.kubeconfig, data_dir)
    kube = node.kube
    wait_for_name = (
        "import socket, time\n"
        "while True:\n"
        "    try:\n"
        "        print('late is', socket.gethostbyname('late'), flush=True); break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
    )
    try:
        await kube.create_pod("default", _pod("target", "import time; time.sleep(600)", {"a": "b"}))
        await kube.create_pod("default", _pod("waiter", wait_for_name, {}))
        target_ip = await _until(lambda: _ip_of(kube, "target"))
        await _until(lambda: _ip_of(kube, "waiter"))
        await kube.client.create(
            resources.SERVICES,
            {
                "metadata": {"name": "late", "namespace": "default"},
                "spec": {"clusterIP": "None", "selector": {"a": "b"}, "ports": [{"port": 80}]},
            },
            namespace="default",
        )

        async def succeeded() -> dict[str, Any] | None:
            pod = await kube.get_pod("default", "waiter")
            return pod if (pod or {}).get("status", {}).get("phase") == "Succeeded" else None

        waiter = await _until(succeeded)
        assert f"late is {target_ip}" in await _log(node, waiter)
    finally:
        await node.stop()


async def test_namespaces_left_by_a_crash_are_removed_on_the_next_start(cluster) -> None:
    api, data_dir = cluster
    node = await start_node(api.kubeconfig, data_dir)
    kube = node.kube
    await kube.create_pod("default", _pod("sleeper", "import time; time.sleep(600)", {}))

    async def running() -> bool:
        pod = await kube.get_pod("default", "sleeper")
        return bool((pod or {}).get("status", {}).get("podIP"))

    await _until(running)
    spaces, bridge = _ours(node)
    assert len(spaces) == 1 and bridge
    # A crash: the node's tasks die; the pod's process (under its shim) and namespace do not.
    tasks = [*node.kubelet._tasks, node.scheduler._task, *node.deployments._tasks]
    tasks += [w.task for w in node.kubelet.workers.values()]
    for task in tasks:
        if task is not None:
            task.cancel()
    await node.kubelet.logs.stop()
    await kube.client.delete(resources.PODS, "sleeper", "default", grace_period_seconds=0)
    await kube.close()

    second = await start_node(api.kubeconfig, data_dir)
    try:

        async def clean() -> bool:
            spaces, bridge = await asyncio.to_thread(_ours, second)
            return not spaces and not bridge

        await _until(clean)
    finally:
        await second.stop()


async def test_networks_of_a_node_whose_data_directory_is_gone_are_removed(cluster) -> None:
    api, data_dir = cluster
    prefix = "tnops" + os.urandom(3).hex()
    gone = podnet.names_of(prefix)
    space = podnet.netns_name(gone, "a-pod-uid")
    await asyncio.to_thread(netns.OWNERS_DIR.mkdir, parents=True, exist_ok=True)
    (netns.OWNERS_DIR / prefix).write_text(str(data_dir / "deleted-long-ago"))
    for argv in (
        ["ip", "netns", "add", space],
        ["ip", "link", "add", gone.bridge, "type", "bridge"],
    ):
        proc = await asyncio.create_subprocess_exec(*argv)
        assert await proc.wait() == 0
    node = await start_node(api.kubeconfig, data_dir)
    try:
        assert space not in os.listdir(netns.NETNS_DIR)
        assert not os.path.exists(f"/sys/class/net/{gone.bridge}")
        assert not (netns.OWNERS_DIR / prefix).exists()
    finally:
        await node.stop()


async def test_a_failing_plugin_keeps_the_pod_waiting_and_leaves_nothing(
    cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, data_dir = cluster
    plugins = tmp_path / "cni"
    plugins.mkdir()
    for name in podnet.NEEDED_PLUGINS:
        script = plugins / name
        script.write_text(
            "#!/bin/sh\ncat >/dev/null\n"
            'echo \'{"cniVersion":"1.0.0","code":11,"msg":"no bridges today"}\'\nexit 1\n'
        )
        script.chmod(0o755)
    monkeypatch.setenv("TRAINOPS_CNI_PATH", str(plugins))
    node = await start_node(api.kubeconfig, data_dir)
    kube = node.kube
    try:
        assert node.kubelet.network.enabled
        await kube.create_pod("default", _pod("unlucky", "print('never')", {}))

        async def failed() -> list[dict[str, Any]]:
            events = await kube.client.list(resources.EVENTS, namespace="default")
            return [e for e in events["items"] if e["reason"] == "FailedCreatePodSandBox"]

        (event,) = await _until(failed)
        assert event["type"] == "Warning"
        assert event["message"].startswith("Failed to create pod sandbox: ")
        assert "no bridges today" in event["message"]
        pod = await kube.get_pod("default", "unlucky")
        assert pod is not None and pod["status"]["phase"] == "Pending"
        assert "podIP" not in pod["status"]

        async def no_namespace() -> bool:  # the half-made one is removed (and made again on
            return not (await asyncio.to_thread(_ours, node))[0]  # each retry, every 2 s)

        await _until(no_namespace)
    finally:
        await node.stop()
    assert _ours(node) == ([], False)


async def test_a_machine_refusing_namespaces_falls_back_at_start(
    cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, data_dir = cluster
    fake = tmp_path / "bin"
    fake.mkdir()
    real_ip = shutil.which("ip")
    (fake / "ip").write_text(
        '#!/bin/sh\nif [ "$1 $2" = "netns add" ]; then\n'
        '  echo "mount --make-shared /run/netns failed: Operation not permitted" >&2; exit 1\n'
        f'fi\nexec {real_ip} "$@"\n'
    )
    (fake / "ip").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    node = await start_node(api.kubeconfig, data_dir)
    try:
        decision = node.kubelet.network.decision
        assert decision.mode == "host"
        assert "setting up pod networks failed" in decision.reason
        assert "Operation not permitted" in decision.reason
        assert _ours(node) == ([], False)
        assert not (netns.OWNERS_DIR / node.kubelet.network.names.netns_prefix).exists()
    finally:
        await node.stop()


async def test_a_host_network_pod_shares_the_nodes_network(cluster) -> None:
    api, data_dir = cluster
    node = await start_node(api.kubeconfig, data_dir)
    kube = node.kube
    try:
        await kube.create_pod(
            "default", _pod("on-host", "import time; time.sleep(600)", {}, hostNetwork=True)
        )
        assert await _until(lambda: _ip_of(kube, "on-host")) == "127.0.0.1"
        assert _ours(node) == ([], False)
    finally:
        await node.stop()


async def test_a_node_without_pod_networks_warns_each_pod(cluster) -> None:
    api, data_dir = cluster
    node = await start_node(api.kubeconfig, data_dir, pod_network=False)
    kube = node.kube
    try:
        assert not node.kubelet.network.enabled
        await kube.create_pod("default", _pod("shared", "print('hi')", {}))
        await kube.create_pod("default", _pod("asked", "print('hi')", {}, hostNetwork=True))

        async def reasons(pod: str) -> list[str]:
            events = await kube.client.list(resources.EVENTS, namespace="default")
            return [e["reason"] for e in events["items"] if e["involvedObject"]["name"] == pod]

        async def warned() -> list[dict[str, Any]]:
            events = await kube.client.list(resources.EVENTS, namespace="default")
            return [e for e in events["items"] if e["reason"] == "HostNetwork"]

        (event,) = await _until(warned)
        assert event["involvedObject"]["name"] == "shared"
        # Events go out in order: once "asked" has its Started, a warning before it would be in.
        asked = await _until(lambda: _started(reasons("asked")))
        assert "HostNetwork" not in asked, asked
        assert event["type"] == "Warning"
        assert "TRAINOPS_POD_NETWORK=host" in event["message"]
        pod = await _until(lambda: kube.get_pod("default", "shared"))
        await _until(lambda: _ip_of(kube, "shared"))
        assert await _ip_of(kube, "shared") == "127.0.0.1"
        assert pod is not None
        assert _ours(node) == ([], False)
    finally:
        await node.stop()


async def _started(reasons: Awaitable[list[str]]) -> list[str] | bool:
    found = await reasons
    return found if "Started" in found else False


async def _ip_of(kube: Any, name: str) -> str:
    pod = await kube.get_pod("default", name)
    return str((pod or {}).get("status", {}).get("podIP") or "")
