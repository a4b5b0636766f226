"""`trainops repo` with nothing but a kubeconfig: through the API server's service proxy to the
GitOps API installed in the cluster (Service trainops-system/trainops-gitops).

The embedded API server does not implement the service proxy (`services/proxy` is not one of
its subresources), so a stand-in plays kube-apiserver's part here, doing what it does to such a
request: authenticate the kubeconfig's bearer token (401 `Status` otherwise), answer 404
`services "…" not found` for any other Service, remove the `Authorization` header (kube-apiserver's
authentication filter deletes it once the user is known) and pass the rest on. Behind it is the
real GitOps API (`gitops.api` over the FakeHub of tests/gitops/test_api.py) logging users in
with a real TokenReview on the embedded API server — so a listing or a sync only works if the
command delivered the user's token past the proxy. The command runs as a user runs it: a
subprocess with a private HOME (no `trainops up`, no ~/.kube/config) and only KUBECONFIG.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from certs import pki
from gitops.api import routes as api
from gitops.api.reviews import KubeAccess
from kube.client import Client
from tests.gitops.test_api import FakeHub
from tests.support.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "http:trainops-gitops:http"


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return web.json_response(body | {"reason": reason, "code": code}, status=code)


@dataclass
class Proxy:
    """The stand-in for kube-apiserver's service proxy in front of the trainops API."""

    url: str
    seen: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
async def installed(cluster: Cluster) -> AsyncIterator[tuple[Proxy, FakeHub]]:
    hub = FakeHub()
    client = await Client.connect(cluster.kubeconfig)
    app = api.create_app(
        hub, token=None, webhook_secret=None, allow_remote_writes=False, access=KubeAccess(client)
    )
    runner, port = await api.serve(app, "127.0.0.1", 0)
    upstream = api.base_url("127.0.0.1", port)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    proxy = Proxy("")

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {cluster.token}":
            return _status(401, "Unauthorized", "Unauthorized")
        namespace, service = request.match_info["namespace"], request.match_info["service"]
        if (namespace, service) != ("trainops-system", SERVICE):
            return _status(404, "NotFound", f'services "{service}" not found')
        passed = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("authorization", "host", "content-length", "connection")
        }
        proxy.seen.append(passed)
        async with session.request(
            request.method,
            f"{upstream}/{request.match_info['tail']}",
            params=request.query,
            data=await request.read() or None,
            headers=passed,
        ) as answer:
            return web.Response(
                status=answer.status,
                body=await answer.read(),
                content_type=answer.content_type,
            )

    front = web.Application()
    front.router.add_route(
        "*", "/api/v1/namespaces/{namespace}/services/{service}/proxy/{tail:.*}", handle
    )
    front_runner = web.AppRunner(front)
    await front_runner.setup()
    site = web.TCPSite(front_runner, "127.0.0.1", 0)
    await site.start()
    proxy.url = f"http://127.0.0.1:{front_runner.addresses[0][1]}"
    try:
        yield proxy, hub
    finally:
        await front_runner.cleanup()
        await session.close()
        await runner.cleanup()
        await client.close()


def kubeconfig(path: Path, server: str, user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def trainops(home: Path, *args: str, kubeconfig: Path | None) -> tuple[int, str, str]:
    """`python -m trainops repo ARGS` with a private HOME and only $KUBECONFIG (if given)."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRAINOPS_", "KUBERNETES_")) and k != "KUBECONFIG"
    }
    environ.update(HOME=str(home), XDG_DATA_HOME=str(home / "xdg"))
    if kubeconfig is not None:
        environ["KUBECONFIG"] = str(kubeconfig)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainops",
        "repo",
        *args,
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    assert b"Traceback" not in err, err.decode()
    return proc.returncode, out.decode(), err.decode()


async def test_only_kubeconfig_lists_and_syncs_through_the_service_proxy_with_the_users_token(
    installed: tuple[Proxy, FakeHub], cluster: Cluster, tmp_path: Path
) -> None:
    proxy, hub = installed
    config = kubeconfig(tmp_path / "config", proxy.url, {"token": cluster.token})
    code, out, err = await trainops(tmp_path, "list", kubeconfig=config)
    assert code == 0, err
    table = [line.split() for line in out.splitlines()]
    assert table[0][:4] == ["NAMESPACE", "NAME", "SYNC", "HEALTH"]
    assert [row[:2] for row in table[1:]] == [
        ["default", "jobs"],
        ["default", "private"],
        ["team-a", "models"],
    ]
    # A write too (the API's write rules: no cross-site headers, a loopback peer here).
    code, out, err = await trainops(
        tmp_path, "sync", "team-a/models", "--kubeconfig", str(config), kubeconfig=None
    )
    assert (code, out, err) == (0, "sync of team-a/models requested\n", "")
    assert hub.calls == [("sync", "team-a", "models", None)]
    # What reached the API: the token as its login cookie, no Authorization (the proxy took it).
    assert all(h.get("Cookie") == f"trainops-token={cluster.token}" for h in proxy.seen)
    assert len(proxy.seen) == 2


async def test_an_unknown_repository_through_the_proxy_is_the_apis_own_not_found(
    installed: tuple[Proxy, FakeHub], cluster: Cluster, tmp_path: Path
) -> None:
    proxy, _ = installed
    config = kubeconfig(tmp_path / "config", proxy.url, {"token": cluster.token})
    code, out, err = await trainops(tmp_path, "get", "team-a/nope", kubeconfig=config)
    assert (code, out, err) == (1, "", "trainops repo: jobrepository team-a/nope not found\n")


async def test_a_client_certificate_user_is_told_to_pass_a_token(
    installed: tuple[Proxy, FakeHub], tmp_path: Path
) -> None:
    proxy, _ = installed
    ca = pki.new_ca("someone")
    pair = pki.new_client_cert(ca, "alice")
    user = {
        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
        "client-key-data": base64.b64encode(pair.key_pem).decode(),
    }
    config = kubeconfig(tmp_path / "config", proxy.url, user)
    code, out, err = await trainops(tmp_path, "list", kubeconfig=config)
    assert (code, out) == (1, "")
    assert err.startswith("trainops repo: no trainops API is running for ")
    assert "$KUBECONFIG: its user has no bearer token (a client certificate?)" in err
    assert "pass --token" in err and err.count("\n") == 1
    assert proxy.seen == []  # nothing was sent without a token to send


async def test_a_cluster_without_the_service_is_one_line_naming_the_server(
    installed: tuple[Proxy, FakeHub], cluster: Cluster, tmp_path: Path
) -> None:
    proxy, _ = installed
    # The stand-in with another Service name in play: kube-apiserver's 404 for a missing one.
    config = kubeconfig(tmp_path / "config", proxy.url, {"token": "not-this-one"})
    code, _, err = await trainops(tmp_path, "list", kubeconfig=config)
    assert code == 1
    assert err == (
        f"trainops repo: the API server {proxy.url} refused the credentials of {_no_up(tmp_path)}; "
        "$KUBECONFIG (401 Unauthorized)\n"
    )
    # The embedded API server itself has no such Service (nor a service proxy): 404.
    code, _, err = await trainops(tmp_path, "list", kubeconfig=cluster.kubeconfig)
    assert code == 1
    assert err.startswith(f"trainops repo: no trainops API in the cluster at {cluster.url} (")
    assert "service trainops-system/trainops-gitops: install deploy/" in err
    assert err.count("\n") == 1


async def test_without_up_or_any_kubeconfig_it_says_what_it_looked_for(tmp_path: Path) -> None:
    code, _, err = await trainops(tmp_path, "list", kubeconfig=None)
    assert code == 1
    assert err == (
        f"trainops repo: {_no_up(tmp_path)}, and no kubeconfig to find one in a cluster "
        "($KUBECONFIG unset, no ~/.kube/config): start it with `trainops up --repo GIT_URL`, "
        "or pass --server URL or --kubeconfig FILE\n"
    )


def _no_up(home: Path) -> str:
    return f"no trainops API is running for {home / 'xdg' / 'trainops'} (no api.json there)"
