"""A local node for the kubelet's integration tests: API server + kubelet in a background loop.

Started once per test session in its own thread and event loop (the tests themselves are
synchronous and use the `kubernetes` client, as a user's script would). The crash-loop back-off
starts at 0.2 s so restart tests stay fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.cluster import eventually as support_eventually

T = TypeVar("T")


@dataclass
class LocalNode:
    kubeconfig: Path
    data_dir: Path
    loop: asyncio.AbstractEventLoop


def eventually(check: Callable[[], T], timeout: float = 15.0, interval: float = 0.05) -> T:
    """`tests.support.cluster.eventually` (one rule: a truthy value), with the node's longer
    default timeout."""
    return support_eventually(check, timeout, interval)


def stray_processes(data_dir: Path) -> list[str]:
    """Processes still running for `data_dir` (shims, or anything with its cwd in there)."""
    found = []
    marker = str(data_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (marker in cmdline or cwd.startswith(marker)):
            found.append(f"{entry.name}: {cmdline}")
    return found


def kill_strays(data_dir: Path) -> None:
    """Test hygiene after a failure: kill the process groups of whatever still runs there."""
    for entry in stray_processes(data_dir):
        pid = int(entry.split(":", 1)[0])
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


@pytest.fixture(scope="session")
def local_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNode]:
    from localcluster.apiserver import ApiServerConfig, start_apiserver
    from localcluster.kubelet.local import start_node
    from localcluster.kubelet.model import BackOffPolicy

    data_dir = tmp_path_factory.mktemp("localnode")
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        try:
            api = await start_apiserver(ApiServerConfig(data_dir=data_dir))
            node = await start_node(
                api.kubeconfig,
                data_dir,
                backoff=BackOffPolicy(initial=0.2, maximum=0.8),
                shutdown_grace_seconds=2.0,
            )
        except BaseException as e:
            ready["error"] = e
            started.set()
            raise
        ready["kubeconfig"] = api.kubeconfig
        started.set()
        await stop.wait()
        await node.stop()
        await api.stop()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    started.wait(30)
    if "error" in ready:
        raise ready["error"]
    yield LocalNode(ready["kubeconfig"], data_dir, loop)
    loop.call_soon_threadsafe(stop.set)
    thread.join(30)
    kill_strays(data_dir)


@pytest.fixture(scope="session")
def core(local_node: LocalNode) -> Any:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(local_node.kubeconfig))
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core: Any) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    # Deleting the namespace deletes everything in it (Deployments first stop making pods).
    core.delete_namespace(name)


@pytest.fixture
def kubectl(local_node: LocalNode) -> Callable[..., Any]:
    import subprocess

    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, "--kubeconfig", str(local_node.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=check,
        )

    return run
