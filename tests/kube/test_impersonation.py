"""`Client.impersonating`: one client per identity, its headers as the API server reads them,
and (on a real API server) the identity the server then sees."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kube import Client, resources
from kube.resources import Resource
from tests.support.cluster import Cluster

SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated")
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False
)


@pytest.fixture
async def echo() -> AsyncIterator[tuple[int, list[Any]]]:
    """A loopback HTTP server answering `{}` and recording each request's headers."""
    seen: list[Any] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.copy())
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port, seen
    finally:
        await runner.cleanup()


def _plain_client(port: int) -> Client:
    from kube.config import Config

    return Client.from_config(
        Config(server=f"http://127.0.0.1:{port}", token="own-token"), timeout=5
    )


async def test_an_impersonating_client_sends_the_user_and_one_header_per_group(
    echo: tuple[int, list[Any]],
) -> None:
    port, seen = echo
    client = _plain_client(port)
    try:
        tenant = client.impersonating("system:serviceaccount:team-a:deployer", SA_GROUPS)
        await tenant.get(resources.CONFIGMAPS, "x", "team-a")
        await tenant.patch(
            resources.CONFIGMAPS, "x", {"data": {}}, "team-a", patch_type="apply", force=True
        )
        await client.get(resources.CONFIGMAPS, "x", "team-a")
    finally:
        await client.close()
    as_tenant, applied, own = seen
    for headers in (as_tenant, applied):
        assert headers.getall("Impersonate-User") == ["system:serviceaccount:team-a:deployer"]
        assert headers.getall("Impersonate-Group") == list(SA_GROUPS)
        assert headers["Authorization"] == "Bearer own-token"  # our credentials, their identity
    assert applied["Content-Type"] == "application/apply-patch+yaml"
    assert "Impersonate-User" not in own and "Impersonate-Group" not in own


async def test_impersonating_clients_are_cached_per_identity_and_closing_one_closes_nothing(
    echo: tuple[int, list[Any]],
) -> None:
    port, seen = echo
    client = _plain_client(port)
    try:
        a = client.impersonating("system:serviceaccount:team-a:x", SA_GROUPS)
        assert client.impersonating("system:serviceaccount:team-a:x", SA_GROUPS) is a
        b = client.impersonating("system:serviceaccount:team-b:x", ())
        assert b is not a
        await a.close()
        await b.get(resources.CONFIGMAPS, "x", "team-b")  # the shared session is still open
        await client.get(resources.CONFIGMAPS, "x", "team-b")
    finally:
        await client.close()
    assert seen[0].getall("Impersonate-User") == ["system:serviceaccount:team-b:x"]
    assert "Impersonate-Group" not in seen[0]
    assert "Impersonate-User" not in seen[1]


@pytest.mark.skipif(
    not os.environ.get("TRAINOPS_TEST_KUBECONFIG"),
    reason="the embedded API server does not authenticate impersonation (no RBAC)",
)
async def test_the_api_server_sees_the_impersonated_service_account(cluster: Cluster) -> None:
    async with await Client.connect(cluster.kubeconfig, timeout=10) as client:
        tenant = client.impersonating("system:serviceaccount:team-a:deployer", SA_GROUPS)
        review = await tenant.create(
            SELF_SUBJECT_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    user = review["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:team-a:deployer"
    assert sorted(user["groups"]) == sorted(SA_GROUPS)
