"""One tenant's stalled Git remotes do not stall another tenant's rounds (issue #17's shared
cluster), against the API server and a real stalled TCP listener on loopback.

The attack: namespace A's JobRepositories point at a server that accepts connections and never
answers, so each of their rounds waits for git's timeout. Before `gitops.runtime.fairness` and the
`ls-remote` timeout, with the defaults (2 workers, 60 s), B's refresh waited ~168 s behind six
of them. Now at most one round of A is in flight and its `ls-remote` gives up after
`ls_remote_timeout`, so B is served by the other worker at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.engine import triggers
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube.client import Client
from kube.manager import Manager
from tests.gitops.conftest import (
    ALONE,
    UNRESTRICTED,
    Remote,
    create_repository,
    repository,
    tf_job_yaml,
    wait_status,
)

STALLED_REPOSITORIES = 6
LS_REMOTE_TIMEOUT = 2.0
B_REFRESH_DEADLINE = 15.0
"""Far below the ~168 s measured before (and below one 60 s git timeout)."""


class StalledServer:
    """Accepts TCP connections on loopback and never answers (nor closes them); counts the
    connections open at once (a client that gives up closes its end)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self.most_open = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._hold, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        self._writers.append(writer)  # kept open, never written to
        try:
            while await reader.read(65536):
                pass  # the request is read and never answered
        finally:
            self.open -= 1

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def stalled() -> AsyncIterator[tuple[StalledServer, int]]:
    server = StalledServer()
    port = await server.start()
    try:
        yield server, port
    finally:
        await server.stop()


def _timed_out(st: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "ComparisonError" and "timed out after 2 s" in str(c.get("message"))
        for c in st.get("conditions") or []
    )


async def test_a_tenants_stalled_remotes_do_not_stall_another_tenants_refresh(
    kclient: Client,
    repo_crd: None,
    namespace: str,
    other_namespace: str,
    stalled: tuple[StalledServer, int],
    tmp_path: Path,
) -> None:
    server, port = stalled
    remote = Remote(tmp_path / "b")
    remote.commit("one job", {"job.yaml": tf_job_yaml("b-job")})
    running = GitOpsReconciler(
        Manager(kclient, leader_election=ALONE),
        tmp_path / "git-cache",
        GitOpsSettings(
            workers=2,  # the default
            git_timeout=60,  # the default: the fetch keeps its long bound
            ls_remote_timeout=LS_REMOTE_TIMEOUT,
            boundaries=UNRESTRICTED,
        ),
    )
    running.manager.start()
    try:
        await running.wait_synced(timeout=20)
        for i in range(STALLED_REPOSITORIES):
            await create_repository(
                kclient,
                repository(namespace, f"http://127.0.0.1:{port}/stalled.git", name=f"slow-{i}"),
            )
        async with asyncio.timeout(10):  # the attack is on: a round of A hangs on the server
            while server.accepted < 1:
                await asyncio.sleep(0.05)
        await create_repository(kclient, repository(other_namespace, remote.url, interval="1h"))
        await wait_status(
            kclient,
            other_namespace,
            lambda s: (s.get("sync") or {}).get("status") == "Synced",
            timeout=B_REFRESH_DEADLINE,
        )

        asked = time.monotonic()
        await running.refresh(other_namespace, "jobs")
        token = (await kclient.get(JOB_REPOSITORIES, "jobs", other_namespace))["metadata"][
            "annotations"
        ][triggers.REFRESH_REQUESTED_AT]
        await wait_status(
            kclient,
            other_namespace,
            lambda s: (s.get(triggers.HANDLED) or {}).get("refreshRequestedAt") == token,
            timeout=B_REFRESH_DEADLINE,
        )
        waited = time.monotonic() - asked
        assert waited < B_REFRESH_DEADLINE
        print(f"B's refresh carried out {waited:.2f} s after it was asked")

        # A's repositories record the timeout (ls-remote's bound, not the fetch's 60 s), one
        # after the other: never two of A's rounds at the stalled server at once.
        for i in range(STALLED_REPOSITORIES):
            await wait_status(
                kclient,
                namespace,
                _timed_out,
                name=f"slow-{i}",
                timeout=4 * STALLED_REPOSITORIES * LS_REMOTE_TIMEOUT,
            )
        assert server.accepted >= STALLED_REPOSITORIES
        assert server.most_open == 1
    finally:
        await running.manager.stop()
