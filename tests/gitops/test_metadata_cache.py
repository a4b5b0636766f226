"""Kinds outside the job caches from metadata-only informers (issue #31 item 2), driven round
by round against the API server: a round that changes nothing sends no LIST and no GET of
them, a changed object is read again alone, and a kind's cache runs while some repository
names it and stops when the last one does not.

The reconciler runs its informers but no workers (`reconcile=False`); each test calls
`reconciler.reconcile(key)` itself. The client records every list and get it sends (the
informers' too: they share it), then does what `kube.Client` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.engine.tenancy import Boundaries
from gitops.runtime.manager import GitOpsReconciler
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from kube.resources import Resource
from tests.gitops.conftest import (
    Remote,
    create_repository,
    get_or_none,
    repository,
    started_reconciler,
    tf_job_yaml,
)
from tests.support.cluster import Cluster, aeventually

CM = resources.CONFIGMAPS
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  lr: '0.1'\n"


class Recording(Client):
    """A `kube.Client` that records (verb, plural, namespace, name) of every list and get."""

    calls: list[tuple[str, str, str | None, str | None]]

    async def list(
        self, resource: Resource, namespace: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        self.calls.append(("list", resource.plural, namespace, None))
        return await super().list(resource, namespace, **kw)

    async def get(
        self, resource: Resource, name: str, namespace: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        self.calls.append(("get", resource.plural, namespace, name))
        return await super().get(resource, name, namespace, **kw)


@pytest.fixture
async def rclient(cluster: Cluster, crds: None) -> AsyncIterator[Recording]:
    client = await Recording.connect(cluster.kubeconfig)
    assert isinstance(client, Recording)
    client.calls = []
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def driven(
    rclient: Recording, repo_crd: None, namespace: str, tmp_path: Path
) -> AsyncIterator[GitOpsReconciler]:
    running = await started_reconciler(
        rclient, namespace, tmp_path / "git", Boundaries.unrestricted(), reconcile=False
    )
    try:
        yield running
    finally:
        await running.manager.stop()


def configmap_calls(client: Recording) -> list[tuple[str, str, str | None, str | None]]:
    return [c for c in client.calls if c[1] == CM.plural]


def caches(running: GitOpsReconciler) -> list[str]:
    """The metadata caches held for repositories (not those of namespaces and accounts, held
    for the process's admission of every repository: gitops.runtime.acting)."""
    names = {i.name for i in running.manager.metadata_informers()}
    assert "metadata:namespaces" in names or not running.reconciler.memos
    return sorted(names - {"metadata:namespaces", "metadata:serviceaccounts"})


async def test_a_round_that_changes_nothing_sends_no_list_or_get_and_a_change_reads_one(
    driven: GitOpsReconciler, rclient: Recording, kclient: Client, namespace: str, remote: Remote
) -> None:
    remote.commit("a job, two ConfigMaps", {
        "job.yaml": tf_job_yaml("a"),
        "one.yaml": CONFIGMAP.format(name="one"),
        "two.yaml": CONFIGMAP.format(name="two"),
    })  # fmt: skip
    await create_repository(
        kclient, repository(namespace, remote.url, automated={"prune": True, "selfHeal": True})
    )
    key = f"{namespace}/jobs"
    rclient.calls.clear()
    await driven.reconciler.reconcile(key)  # the sync
    assert await get_or_none(kclient, CM, "two", namespace) is not None
    memo = driven.reconciler.memos[key]
    assert caches(driven) == ["metadata:configmaps"]  # every namespace: unrestricted
    assert driven.metadata.held(key) == {("v1", CM.plural, "")}

    async def seen_by_cache(name: str, rv: str) -> None:
        (informer,) = [i for i in driven.manager.metadata_informers() if i.resource == CM]

        def current() -> bool:
            obj = informer.get(namespace, name)
            return obj is not None and obj["metadata"]["resourceVersion"] == rv

        await aeventually(current, timeout=10)

    synced = memo.live.comparison
    assert synced is not None and synced.synced
    for name in ("one", "two"):
        live = await kclient.get(CM, name, namespace)
        await seen_by_cache(name, live["metadata"]["resourceVersion"])
    rv = (await kclient.get(resources.TFJOBS, "a", namespace))["metadata"]["resourceVersion"]
    jobs = driven.job_informers["TensorFlowTrainingJob"]
    await aeventually(lambda: (jobs.get(namespace, "a") or {}).get("metadata", {})
                      .get("resourceVersion") == rv, timeout=10)  # fmt: skip
    # The state after the sync was derived from the applies' answers: the caches, once they
    # show them, tell the same, so the next round compares nothing and reads no ConfigMap.
    await driven.reconciler.reconcile(key)
    first = memo.live.comparison
    assert first is synced
    assert [c for c in configmap_calls(rclient) if c[0] == "get"] == []

    # Nothing changed: three rounds, no comparison, and not one list or get of ConfigMaps.
    rclient.calls.clear()
    for _ in range(3):
        await driven.reconciler.reconcile(key)
    assert memo.live.comparison is first
    assert configmap_calls(rclient) == []

    # One ConfigMap edited by hand: the next round reads that one alone, and heals it.
    edited = await kclient.patch(CM, "two", {"data": {"lr": "0.5"}}, namespace)
    await seen_by_cache("two", edited["metadata"]["resourceVersion"])
    await driven.reconciler.reconcile(key)
    assert memo.live.comparison is not first
    assert ("get", CM.plural, namespace, "two") in configmap_calls(rclient)
    assert ("get", CM.plural, namespace, "one") not in configmap_calls(rclient)
    assert [c for c in configmap_calls(rclient) if c[0] == "list"] == []
    assert (await kclient.get(CM, "two", namespace))["data"] == {"lr": "0.1"}


async def test_a_kinds_cache_runs_while_a_repository_names_it_and_stops_after_the_last(
    driven: GitOpsReconciler, kclient: Client, namespace: str, tmp_path: Path
) -> None:
    ours, theirs = Remote(tmp_path / "ours"), Remote(tmp_path / "theirs")
    ours.commit("ours", {"job.yaml": tf_job_yaml("mine"), "cm.yaml": CONFIGMAP.format(name="o")})
    theirs.commit("theirs", {"cm.yaml": CONFIGMAP.format(name="t")})
    for name, remote in (("ours", ours), ("theirs", theirs)):
        body = repository(namespace, remote.url, name=name, automated={"prune": True})
        await create_repository(kclient, body)
        await driven.reconciler.reconcile(f"{namespace}/{name}")
    assert caches(driven) == ["metadata:configmaps"]  # one cache, two holders

    # One repository gone: the other still names ConfigMaps, the cache keeps running.
    await kclient.delete(JOB_REPOSITORIES, "theirs", namespace)
    gone = f"{namespace}/theirs"
    await aeventually(lambda: driven.repos.get(namespace, "theirs") is None, timeout=10)
    await driven.reconciler.reconcile(gone)
    assert driven.metadata.held(gone) == set()
    for _ in range(3):
        await driven.reconciler.reconcile(f"{namespace}/ours")
    assert caches(driven) == ["metadata:configmaps"]

    # The last ConfigMap leaves Git: pruned, then its kind is let go and the cache stops.
    ours.commit("no settings", {"cm.yaml": None})
    key = f"{namespace}/ours"
    await driven.reconciler.reconcile(key)
    assert await get_or_none(kclient, CM, "o", namespace) is None
    await driven.reconciler.reconcile(key)
    assert caches(driven) == []
    assert driven.metadata.held(key) == set()
    for _ in range(3):  # and it is not started again by rounds that do not need it
        await driven.reconciler.reconcile(key)
    assert caches(driven) == []
