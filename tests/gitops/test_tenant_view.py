"""A repository's reads of the shared caches are asked as its identity
(`gitops.runtime.tenantview.CacheAccess`): the API server's RBAC, not our rules, decides which
cached training jobs, and which objects of the metadata caches, a repository's round may see."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from gitops.engine.pairing import ResourceKey
from gitops.runtime.discovery import Discovery
from gitops.runtime.livestate import LiveReader
from gitops.runtime.metacache import MetadataCache
from gitops.runtime.tenantview import CacheAccess, review
from kube import Client, LeaderElection, Manager
from kube.resources import CONFIGMAPS, NAMESPACES
from tests.support.tenants import DEPLOYER_RULES, ROLE_BINDINGS, service_account

REAL_RBAC = pytest.mark.skipif(
    not os.environ.get("TRAINOPS_TEST_KUBECONFIG"),
    reason="the embedded API server does not enforce RBAC (run on the reference cluster: "
    "hack/reference-tests)",
)
JOBS = ("batch.tensorstack.dev", "tensorflowtrainingjobs")


def test_the_review_asks_for_the_verb_on_the_resource_in_the_namespace() -> None:
    assert review("list", *JOBS, "team-a")["spec"] == {
        "resourceAttributes": {
            "verb": "list",
            "group": "batch.tensorstack.dev",
            "resource": "tensorflowtrainingjobs",
            "namespace": "team-a",
        }
    }
    assert "namespace" not in review("list", "", "nodes", "")["spec"]["resourceAttributes"]


async def test_answers_are_kept_for_their_ttl_then_asked_again(
    kclient: Client,
) -> None:
    """Against the API server (the embedded one allows every review): one review per
    (verb, group, resource, namespace) within the ttl."""
    now = [0.0]
    access = CacheAccess(kclient, ttl=10, clock=lambda: now[0])
    assert await access.may_list(*JOBS, "default")
    assert list(access._answers) == [("list", *JOBS, "default")]
    first = access._answers[("list", *JOBS, "default")][0]
    now[0] = 9.0
    assert await access.may_list(*JOBS, "default")
    assert access._answers[("list", *JOBS, "default")][0] == first  # kept, not asked again
    now[0] = 11.0
    assert await access.may_list(*JOBS, "default")
    assert access._answers[("list", *JOBS, "default")][0] == 11.0  # asked again


@pytest.fixture
async def two_namespaces(kclient: Client) -> AsyncIterator[tuple[str, str]]:
    names = tuple(f"view-{uuid.uuid4().hex[:6]}-{side}" for side in "ab")
    for name in names:
        await kclient.create(NAMESPACES, {"metadata": {"name": name}})
    try:
        yield names[0], names[1]
    finally:
        for name in names:
            await kclient.delete(NAMESPACES, name)


@REAL_RBAC
async def test_a_repository_may_see_only_what_its_service_account_may_list(
    kclient: Client, two_namespaces: tuple[str, str]
) -> None:
    mine, theirs = two_namespaces
    await service_account(kclient, mine, "deployer", DEPLOYER_RULES)
    identity = kclient.impersonating(
        f"system:serviceaccount:{mine}:deployer",
        ("system:serviceaccounts", f"system:serviceaccounts:{mine}", "system:authenticated"),
    )
    now = [0.0]
    access = CacheAccess(identity, ttl=10, clock=lambda: now[0])
    assert await access.may_list(*JOBS, mine)
    assert not await access.may_list(*JOBS, theirs)
    # Its RoleBinding gone, the cache is closed to it once the answer expires.
    await kclient.delete(ROLE_BINDINGS, "deployer", mine)
    assert await access.may_list(*JOBS, mine)  # within the ttl
    now[0] = 11.0
    assert not await access.may_list(*JOBS, mine)


@REAL_RBAC
async def test_a_metadata_cache_shows_a_repository_only_what_its_service_account_may_list(
    kclient: Client, two_namespaces: tuple[str, str]
) -> None:
    """The reconciler (admin here) watches ConfigMaps of every namespace once; a repository
    acting as an account that may list them in its namespace only is shown that namespace's
    alone, though the other's carries its uid too."""
    mine, theirs = two_namespaces
    await service_account(kclient, mine, "deployer", DEPLOYER_RULES)
    identity = kclient.impersonating(
        f"system:serviceaccount:{mine}:deployer",
        ("system:serviceaccounts", f"system:serviceaccounts:{mine}", "system:authenticated"),
    )
    uid = f"uid-{uuid.uuid4().hex[:8]}"
    for namespace in (mine, theirs):
        meta = {"name": "settings", "namespace": namespace,
                "labels": {"gitops.trainops.dev/repository-uid": uid}}  # fmt: skip
        await kclient.create(CONFIGMAPS, {"metadata": meta, "data": {"lr": "0.1"}})
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    manager.start()
    try:
        reader = LiveReader(identity, Discovery(identity), None, MetadataCache(manager))
        probe = await reader.probe(f"{mine}/jobs", uid, [("v1", "ConfigMap")], [], scope=None)
        (informer,) = manager.metadata_informers()
        assert informer.namespace is None  # one cache of every namespace, the reconciler's
        assert informer.get(theirs, "settings") is not None
        assert set(probe.objects) == {ResourceKey("", "ConfigMap", mine, "settings")}
        assert probe.objects[ResourceKey("", "ConfigMap", mine, "settings")]["data"] == {
            "lr": "0.1"
        }
    finally:
        await manager.stop()
