"""Several replicas of the GitOps component on one API server: one leads, all serve the API.

Each replica is what `trainops gitops` runs (`trainops.commands.gitops_service.component`: the
reconciler and its app), with its own cache directory, all on one Lease in the test's
namespace. A sync asked through a standby's API is written to the JobRepository
(`gitops.engine.triggers`) and carried out by the leader once; one asked while no leader runs is
carried out by the next leader; a request handled by one leader is not carried out again by
the next. "Once" is counted with each replica's `trainops_gitops_syncs_total`, after a later
refresh has been handled (so a round has run since, which would have redone a pending sync).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gitops.engine import triggers
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.gitops.conftest import (
    UNRESTRICTED,
    Remote,
    create_repository,
    get_or_none,
    repository,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import Cluster, aeventually
from trainops.commands import gitops_service

pytestmark = pytest.mark.usefixtures("repo_crd")

LEASE = "gitops-replicas"


def settings(namespace: str, *, reconcile: bool = True) -> GitOpsSettings:
    return GitOpsSettings(
        lease_name=LEASE,
        namespace=namespace,
        git_timeout=20,
        boundaries=UNRESTRICTED,
        reconcile=reconcile,
    )


def leader_election(namespace: str, identity: str) -> LeaderElection:
    return LeaderElection(
        namespace=namespace,
        lease_duration=4.0,
        renew_deadline=3.0,
        retry_period=0.3,
        identity=identity,
    )


@asynccontextmanager
async def replica(
    client: Client, tmp_path: Path, namespace: str, identity: str, *, reconcile: bool = True
) -> AsyncIterator[tuple[GitOpsReconciler, TestClient[Any, Any]]]:
    """A started replica (its own Manager, as each process has) and a client of its app
    (served on loopback)."""
    manager = Manager(client, leader_election=leader_election(namespace, identity))
    built = gitops_service.component(
        manager,
        tmp_path / identity,
        settings(namespace, reconcile=reconcile),
        webhook_secret=None,
        allow_remote_writes=False,
    )
    manager.start()
    try:
        await manager.wait_synced(timeout=20)
        async with TestClient(TestServer(built.app, host="127.0.0.1")) as site:
            yield built.reconciler, site
    finally:
        await manager.stop()


def syncs(reconciler: GitOpsReconciler) -> float:
    value = reconciler.metrics.registry.get_sample_value(
        "trainops_gitops_syncs_total", {"result": "Succeeded"}
    )
    return value or 0.0


def manual(namespace: str, url: str) -> dict[str, Any]:
    body = repository(namespace, url)
    del body["spec"]["syncPolicy"]["automated"]  # synced only when asked
    return body


async def annotations_of(client: Client, namespace: str) -> dict[str, str]:
    obj = await client.get(JOB_REPOSITORIES, "jobs", namespace)
    return dict(obj["metadata"].get("annotations") or {})


async def handled(client: Client, namespace: str, field: str) -> dict[str, Any]:
    """The status once the request now on the object (`field` of lastHandledRequest) is
    recorded as handled."""
    key = {
        "syncRequestedAt": triggers.SYNC_REQUESTED_AT,
        "refreshRequestedAt": triggers.REFRESH_REQUESTED_AT,
    }[field]
    wanted = (await annotations_of(client, namespace))[key]
    return await wait_status(
        client,
        namespace,
        lambda s: (s.get(triggers.HANDLED) or {}).get(field) == wanted,
        timeout=20,
    )


async def post(site: TestClient[Any, Any], token: str, path: str, body: Any = None) -> Any:
    response = await site.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status == 202, await response.text()
    return await response.json()


def leader_of(*replicas: GitOpsReconciler) -> Callable[[], GitOpsReconciler | bool]:
    def check() -> GitOpsReconciler | bool:
        leading = [r for r in replicas if r.is_leader]
        return leading[0] if len(leading) == 1 else False

    return check


async def test_a_sync_asked_of_the_standby_is_carried_out_by_the_leader_once(
    kclient: Client, cluster: Cluster, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    async with (
        replica(kclient, tmp_path, namespace, "replica-a") as (a, site_a),
        replica(kclient, tmp_path, namespace, "replica-b") as (b, site_b),
    ):
        leader = await aeventually(leader_of(a, b), timeout=15)
        standby, standby_site = (b, site_b) if leader is a else (a, site_a)
        await create_repository(kclient, manual(namespace, remote.url))
        st = await wait_status(kclient, namespace, lambda s: (s.get("sync") or {}).get("revision"))
        assert st["sync"] == {"status": "OutOfSync", "revision": sha, "shortRevision": sha[:7]}

        answer = await post(
            standby_site, cluster.token, f"/api/v1/repositories/{namespace}/jobs/sync"
        )
        assert answer["repository"] == f"{namespace}/jobs"
        st = await handled(kclient, namespace, "syncRequestedAt")
        assert st["operationState"]["phase"] == "Succeeded"
        assert st["sync"]["status"] == "Synced"
        assert await get_or_none(kclient, resources.TFJOBS, "a", namespace) is not None

        # A refresh through the standby too: once it is handled, a round has run since the
        # sync's, and that round would have synced again had the sync still been pending.
        await post(standby_site, cluster.token, f"/api/v1/repositories/{namespace}/jobs/refresh")
        after = await handled(kclient, namespace, "refreshRequestedAt")
        assert after["operationState"]["startedAt"] == st["operationState"]["startedAt"]
        assert (syncs(leader), syncs(standby)) == (1.0, 0.0)
        assert leader.is_leader and not standby.is_leader


async def test_a_request_made_while_no_leader_runs_is_carried_out_by_the_next_one_only(
    kclient: Client, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, manual(namespace, remote.url))
    async with replica(kclient, tmp_path, namespace, "watcher", reconcile=False) as (watch, _):
        async with replica(kclient, tmp_path, namespace, "first") as (first, _site):
            await aeventually(lambda: first.is_leader, timeout=15)
            await wait_status(kclient, namespace, lambda s: (s.get("sync") or {}).get("revision"))
            await watch.sync(namespace, "jobs")  # through the Hub, as the API calls it
            await handled(kclient, namespace, "syncRequestedAt")
            assert syncs(first) == 1.0
        # The first leader has stopped (its lease released): nobody reconciles now.
        await kclient.delete(resources.TFJOBS, "a", namespace)
        await watch.sync(namespace, "jobs")
        obj = await kclient.get(JOB_REPOSITORIES, "jobs", namespace)
        assert triggers.pending(obj).sync, "nothing may have handled it: no leader runs"

        async with replica(kclient, tmp_path, namespace, "next") as (following, _site):
            await aeventually(lambda: following.is_leader, timeout=15)
            st = await handled(kclient, namespace, "syncRequestedAt")
            assert st["operationState"]["phase"] == "Succeeded"
            assert await get_or_none(kclient, resources.TFJOBS, "a", namespace) is not None
            await watch.refresh(namespace, "jobs")
            await handled(kclient, namespace, "refreshRequestedAt")
            # The first leader's request was not carried out again: one sync, the new one.
            assert syncs(following) == 1.0


async def test_a_revision_sync_is_refused_before_anything_is_written(
    kclient: Client, cluster: Cluster, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, manual(namespace, remote.url))
    async with replica(kclient, tmp_path, namespace, "only") as (_, site):
        await wait_status(kclient, namespace, lambda s: (s.get("sync") or {}).get("revision"))
        response = await site.post(
            f"/api/v1/repositories/{namespace}/jobs/sync",
            json={"revision": "-bad"},
            headers={"Authorization": f"Bearer {cluster.token}"},
        )
        assert response.status == 400
        assert triggers.SYNC_REQUESTED_AT not in await annotations_of(kclient, namespace)


async def test_a_standby_that_cannot_tell_heads_branch_says_so_and_the_leader_accepts_it(
    kclient: Client, cluster: Cluster, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url, automated={"prune": True})
    await create_repository(kclient, body)
    async with (
        replica(kclient, tmp_path, namespace, "replica-a") as (a, site_a),
        replica(kclient, tmp_path, namespace, "replica-b") as (b, site_b),
    ):
        leader = await aeventually(leader_of(a, b), timeout=15)
        site, standby_site = (site_a, site_b) if leader is a else (site_b, site_a)
        await wait_status(
            kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == sha
        )
        path = f"/api/v1/repositories/{namespace}/jobs/sync"
        bearer = {"Authorization": f"Bearer {cluster.token}"}
        refused = await standby_site.post(path, json={"revision": "main"}, headers=bearer)
        assert refused.status == 400
        assert "this replica does not know HEAD's branch" in (await refused.json())["error"]
        assert triggers.SYNC_REQUESTED_AT not in await annotations_of(kclient, namespace)
        accepted = await site.post(path, json={"revision": "main"}, headers=bearer)
        assert accepted.status == 202
        assert (await annotations_of(kclient, namespace))[triggers.SYNC_REVISION] == "main"
        # The sha works on either replica: the status says which commit is synced.
        assert (await standby_site.post(path, json={"revision": sha}, headers=bearer)).status == 202
