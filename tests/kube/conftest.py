"""Fixtures for the client runtime's tests: a `kube.Client` on the shared test cluster, and a
private embedded API server (in the test's own event loop, with a short event history) for the
tests that stop, restart or expire things."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kube import Client
from tests.support.cluster import Cluster

NOT_PUBLISHED = "metadata.name!=kube-root-ca.crt"
"""A field selector leaving out the ConfigMap a real cluster's controller manager publishes in
every namespace, for tests that list every ConfigMap of their namespace."""


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[Client]:
    c = await Client.connect(cluster.kubeconfig, timeout=10.0)
    try:
        yield c
    finally:
        await c.close()


@dataclass
class PrivateServer:
    """An embedded API server of one test; `start(port=...)` again after `stop()` resumes
    from the same data directory."""

    data_dir: Path
    event_history: int = 5
    bookmark_interval: float = 0.2
    running: Any = field(default=None, repr=False)

    async def start(self, port: int = 0) -> Any:
        from localcluster.apiserver import ApiServerConfig, start_apiserver

        self.running = await start_apiserver(
            ApiServerConfig(
                data_dir=self.data_dir,
                port=port,
                event_history=self.event_history,
                bookmark_interval=self.bookmark_interval,
            )
        )
        return self.running

    async def stop(self) -> None:
        if self.running is not None:
            await self.running.stop()
            self.running = None

    @property
    def port(self) -> int:
        return int(self.running.port)

    async def client(self, timeout: float = 5.0) -> Client:
        assert self.running is not None
        return await Client.connect(self.running.kubeconfig, timeout=timeout)


@pytest.fixture
async def private_server(tmp_path: Path) -> AsyncIterator[PrivateServer]:
    server = PrivateServer(tmp_path / "apiserver")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
