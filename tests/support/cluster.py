"""Shared integration-test fixtures: one API server per test run, unique namespaces, polling.

`cluster` (session scope) starts the embedded API server once, in a background thread with its
own event loop and a temporary data dir, so sync tests, async tests and subprocesses (kubectl)
can all talk to it over loopback. With `TRAINOPS_TEST_KUBECONFIG` set, the tests run against
that real cluster instead. `namespace` gives each test a fresh namespace. `eventually` /
`aeventually` poll a check until it passes or a deadline expires (never bare sleeps).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

__all__ = [
    "BackgroundApiServer",
    "Cluster",
    "aeventually",
    "cluster",
    "eventually",
    "namespace",
]

T = TypeVar("T")


class BackgroundApiServer:
    """The embedded API server running in a thread with its own event loop."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        from localcluster.apiserver import ApiServerConfig, start_apiserver

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="apiserver", daemon=True)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            start_apiserver(ApiServerConfig(data_dir=data_dir, **config)), self.loop
        )
        try:
            self.server = future.result(timeout=30)
        except BaseException:
            self._shutdown_loop()
            raise

    def call(self, coro: Awaitable[T], timeout: float = 30) -> T:
        """Run a coroutine on the server's loop (e.g. to inspect `server.server.store`)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        finally:
            self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


@dataclass
class Cluster:
    """What tests need to reach the cluster."""

    kubeconfig: Path
    url: str
    token: str
    ca_file: Path
    data_dir: Path | None = None
    embedded: BackgroundApiServer | None = field(default=None, repr=False)

    @property
    def is_embedded(self) -> bool:
        return self.embedded is not None

    def api_client(self) -> Any:
        """A new `kubernetes` (sync) ApiClient for this cluster."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    async def async_api_client(self) -> Any:
        """A new `kubernetes_asyncio` ApiClient (close it with `await client.close()`)."""
        from kubernetes_asyncio import config

        return await config.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl_env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster; with `check`, a failure fails the test
        showing kubectl's stderr."""
        out = subprocess.run(
            [shutil.which("kubectl") or "kubectl", *args],
            input=stdin,
            env=self.kubectl_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out

    def wait_established(self, *crds: str, timeout: float = 30.0) -> None:
        """Wait until each CRD is Established. (`kubectl wait --for=condition=Established`
        fails at once, rather than waiting, on a CRD a real API server has not given any
        condition yet.)"""
        jsonpath = '{.status.conditions[?(@.type=="Established")].status}'

        def established(crd: str) -> bool:
            got = self.kubectl("get", f"crd/{crd}", "-o", f"jsonpath={jsonpath}", check=False)
            return got.stdout == "True"

        for crd in crds:
            eventually(lambda: established(crd), timeout=timeout, interval=0.2)  # noqa: B023


def _from_kubeconfig(path: Path) -> Cluster:
    """A Cluster for an existing kubeconfig (token auth; the CA is written to a temp file)."""
    config = yaml.safe_load(path.read_text())
    current = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster_cfg = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    ca_file = Path(tempfile.mkdtemp(prefix="trainops-ca-")) / "ca.crt"
    if "certificate-authority-data" in cluster_cfg:
        ca_file.write_bytes(base64.b64decode(cluster_cfg["certificate-authority-data"]))
    elif "certificate-authority" in cluster_cfg:
        ca_file = Path(cluster_cfg["certificate-authority"])
    return Cluster(path, cluster_cfg["server"], user.get("token", ""), ca_file)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    external = os.environ.get("TRAINOPS_TEST_KUBECONFIG")
    if external:
        yield _from_kubeconfig(Path(external))
        return
    data_dir = tmp_path_factory.mktemp("localcluster")
    embedded = BackgroundApiServer(data_dir, bookmark_interval=0.5)
    srv = embedded.server
    try:
        yield Cluster(srv.kubeconfig, srv.url, srv.token, srv.ca_file, data_dir, embedded)
    finally:
        embedded.stop()


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards. Returned once the
    root-CA publisher has put `kube-root-ca.crt` into it (both the embedded server and a real
    cluster do, a moment after the namespace appears), so watches and lists the test starts do
    not see it arrive."""
    from kubernetes import client

    base = request.node.name.lower().replace("_", "-")
    name = "".join(ch for ch in base if ch.isalnum() or ch == "-")[:40].strip("-")
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        eventually(lambda: core.read_namespaced_config_map("kube-root-ca.crt", name), timeout=30)
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
        finally:
            api.close()


def _passed(result: Any) -> bool:
    """The one rule of `eventually` and `aeventually`: a check has passed when it returns a
    truthy value without raising. A check with nothing to give back returns True; one whose
    answer can be empty wraps it (`(found,)`)."""
    return bool(result)


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """Call `check` until it returns a truthy value without raising; return that value."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = check()
            if _passed(result):
                return result
            last = AssertionError(f"check returned {result!r}")
        except Exception as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout}s: {last!r}") from last
        time.sleep(interval)


async def aeventually(
    check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Async `eventually` (the same rule): `check` may be a plain or an async function."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if _passed(result):
                return result
            last = AssertionError(f"check returned {result!r}")
        except Exception as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout}s: {last!r}") from last
        await asyncio.sleep(interval)
