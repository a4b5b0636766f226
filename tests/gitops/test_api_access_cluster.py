"""The API and dashboard authenticated and authorized by a real API server (`gitops.api.reviews`
posting TokenReview and SubjectAccessReview through `kube`), over loopback.

On both servers: 401 without a token and the login flow (the login link and the form set the
HttpOnly, SameSite=Strict cookie; the link's token leaves the URL; logout clears it), with
cross-site writes still refused. On the embedded server: `DATA_DIR/api-token` is a user it
knows (`trainops up` hands it to `trainops repo` and the banner's link). On the reference
kube-apiserver only (RBAC; hack/reference-tests): two ServiceAccounts bound in two namespaces,
with tokens from the TokenRequest API, each see and do only their own. The Hub is the API's
FakeHub (tests/gitops/test_api.py): what is under test is who may reach it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

import dashboard
from gitops.api import routes as api
from gitops.api.reviews import KubeAccess
from gitops.api.rules import GROUP, Check
from kube import errors, resources
from kube.client import Client
from tests.gitops.test_api import FakeHub, read_event, repository
from tests.reference.conftest import service_account_kubeconfig
from tests.support.cluster import Cluster, aeventually
from tests.support.tenants import ROLE_BINDINGS, SERVICE_ACCOUNTS, team_token

REAL_RBAC = pytest.mark.skipif(
    not os.environ.get("TRAINOPS_TEST_KUBECONFIG"),
    reason="the embedded API server does not enforce RBAC: every SubjectAccessReview is allowed "
    "(run on the reference cluster: hack/reference-tests)",
)
EVIL = {"Origin": "http://evil.example"}


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[Client]:
    client = await Client.connect(cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def site_for(hub: FakeHub, client: Client) -> TestClient[Any, Any]:
    app = api.create_app(
        hub,
        token=None,
        webhook_secret=None,
        allow_remote_writes=False,
        access=KubeAccess(client),
    )
    dashboard.install(app, hub=hub, client=client)
    return TestClient(TestServer(app, host="127.0.0.1"))


def cookie_of(response: Any) -> str:
    """The Set-Cookie header of the login cookie (asserting there is exactly one)."""
    values = [v for v in response.headers.getall("Set-Cookie", []) if "trainops-token=" in v]
    assert len(values) == 1, response.headers
    return str(values[0])


async def test_without_a_token_the_api_is_401_and_pages_go_to_the_login_page(
    cluster: Cluster, admin: Client
) -> None:
    async with site_for(FakeHub(), admin) as site:
        response = await site.get("/api/v1/repositories")
        assert response.status == 401
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="trainops"'
        assert await response.json() == {"error": "a bearer token is required"}
        response = await site.get("/api/v1/jobs", headers={"Authorization": "Bearer not-a-token"})
        assert response.status == 401
        assert await response.json() == {"error": "the token is not valid"}
        response = await site.get("/repositories/default/jobs?x=1", allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/login?next=/repositories/default/jobs?x%3D1"
        login = await site.get("/login")
        text = await login.text()
        assert login.status == 200
        assert 'name="token"' in text and 'type="password"' in text
        assert (await site.get("/static/dashboard.css")).status == 200
        # With the admin's token the API answers.
        response = await site.get(
            "/api/v1/repositories", headers={"Authorization": f"Bearer {cluster.token}"}
        )
        assert response.status == 200
        assert len((await response.json())["items"]) == 3


async def test_the_login_link_sets_the_cookie_and_leaves_no_token_in_the_url(
    cluster: Cluster, admin: Client
) -> None:
    async with site_for(FakeHub(), admin) as site:
        response = await site.get(f"/?token={cluster.token}&q=mnist", allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/?q=mnist"
        cookie = cookie_of(response)
        assert cookie.startswith(f"trainops-token={cluster.token};")
        attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"httponly", "path=/", "samesite=strict"} <= attributes
        front = await site.get("/", headers={"Cookie": f"trainops-token={cluster.token}"})
        text = await front.text()
        assert front.status == 200
        assert 'action="/logout"' in text
        assert cluster.token not in text
        # A link another site sends the browser to logs nobody in (login CSRF).
        response = await site.get(
            f"/?token={cluster.token}",
            headers={"Sec-Fetch-Site": "cross-site"},
            allow_redirects=False,
        )
        assert response.status == 303
        assert response.headers["Location"] == "/login"
        assert "Set-Cookie" not in response.headers
        # A link with a token the cluster does not accept: to the login page, no cookie.
        response = await site.get("/?token=forged", allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/login"
        assert cookie_of(response).startswith('trainops-token="";')
        # Logout clears the cookie.
        response = await site.post("/logout", allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"] == "/login"
        assert cookie_of(response).startswith('trainops-token="";')


async def test_the_login_form_checks_the_token_and_follows_only_local_next_paths(
    cluster: Cluster, admin: Client
) -> None:
    async with site_for(FakeHub(), admin) as site:
        response = await site.post("/login", data={"token": "forged", "next": "/jobs"})
        assert response.status == 401
        assert "does not accept this token" in await response.text()
        assert "Set-Cookie" not in response.headers
        for target, expected in [
            ("/repositories/default/jobs", None),
            ("//evil.example/", "/"),
            ("/\t/evil.example/", "/"),  # a browser drops the tab: //evil.example
            ("/\r\nSet-Cookie: x=1", "/"),  # was no answer at all, and a traceback
        ]:
            response = await site.post(
                "/login",
                data={"token": cluster.token, "next": target},
                allow_redirects=False,
            )
            assert response.status == 303
            assert response.headers["Location"] == (expected or target)
            assert cookie_of(response).startswith(f"trainops-token={cluster.token};")


async def test_cross_site_requests_stay_refused_with_a_valid_cookie(
    cluster: Cluster, admin: Client
) -> None:
    hub = FakeHub()
    cookie = {"Cookie": f"trainops-token={cluster.token}"}
    async with site_for(hub, admin) as site:
        for path in (
            "/api/v1/repositories/default/jobs/sync",
            "/api/v1/jobs/default/tensorflowtrainingjobs/mnist/pause",
        ):
            for headers in (EVIL, {"Sec-Fetch-Site": "cross-site"}):
                response = await site.post(path, headers={**headers, **cookie})
                assert response.status == 403
                assert "cross-site request refused" in (await response.json())["error"]
        # Logging in from another site is refused too (login CSRF).
        response = await site.post("/login", data={"token": cluster.token}, headers=EVIL)
        assert response.status == 403
        assert hub.calls == []
        response = await site.post("/api/v1/repositories/default/jobs/sync", headers=cookie)
        assert response.status == 202


@pytest.mark.embedded_only("reads the embedded server's DATA_DIR/api-token")
async def test_the_embedded_server_knows_the_api_token_and_allows_its_user(
    cluster: Cluster, admin: Client
) -> None:
    assert cluster.data_dir is not None
    path = cluster.data_dir / "api-token"
    assert path.stat().st_mode & 0o777 == 0o600
    token = path.read_text().strip()
    review = await admin.create(
        resources.TOKEN_REVIEWS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
    )
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "trainops-user"
    assert "token" not in review.get("spec", {})
    hub = FakeHub()
    async with site_for(hub, admin) as site:
        bearer = {"Authorization": f"Bearer {token}"}
        response = await site.post("/api/v1/repositories/team-a/models/sync", headers=bearer)
        assert response.status == 202
        assert hub.calls == [("sync", "team-a", "models", None)]


# --- two teams on a real API server (RBAC) -----------------------------------------------------


@pytest.fixture
def teams(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """Two fresh namespaces, deleted afterwards."""
    from kubernetes import client

    suffix = uuid.uuid4().hex[:6]
    names = (f"team-a-{suffix}", f"team-b-{suffix}")
    api_client = cluster.api_client()
    core = client.CoreV1Api(api_client)
    for name in names:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield names
    finally:
        for name in names:
            try:
                core.delete_namespace(name)
            except client.ApiException as e:
                if e.status != 404:
                    raise
        api_client.close()


@REAL_RBAC
async def test_two_teams_see_and_do_only_their_own(admin: Client, teams: tuple[str, str]) -> None:
    team_a, team_b = teams
    alice = await team_token(admin, team_a, "alice")
    bob = await team_token(admin, team_b, "bob")
    hub = FakeHub(
        repositories=[
            repository(team_a, "jobs", "https://git.example/a.git"),
            repository(team_b, "jobs", "https://git.example/b.git"),
        ],
        diffs={},
        jobs=[
            {"kind": "TensorFlowTrainingJob", "metadata": {"namespace": ns, "name": "m"}}
            for ns in teams
        ],
    )
    async with site_for(hub, admin) as site:

        async def call(method: str, path: str, token: str) -> tuple[int, Any]:
            response = await site.request(
                method, path, headers={"Authorization": f"Bearer {token}"}
            )
            return response.status, await response.json()

        for token, own in ((alice, team_a), (bob, team_b)):
            status, body = await call("GET", "/api/v1/repositories", token)
            assert status == 200
            assert [r["metadata"]["namespace"] for r in body["items"]] == [own]
            status, body = await call("GET", "/api/v1/jobs", token)
            assert [j["namespace"] for j in body["items"]] == [own]

        status, body = await call("POST", f"/api/v1/repositories/{team_b}/jobs/sync", alice)
        assert (status, body) == (
            403,
            {
                "error": f'User "system:serviceaccount:{team_a}:alice" cannot patch resource '
                f'"jobrepositories" in API group "gitops.trainops.dev" in the namespace "{team_b}"'
            },
        )
        status, body = await call("GET", f"/api/v1/repositories/{team_b}/jobs", alice)
        assert status == 403 and list(body) == ["error"]
        status, body = await call(
            "POST", f"/api/v1/jobs/{team_b}/tensorflowtrainingjobs/m/pause", alice
        )
        assert status == 403
        assert 'cannot patch resource "tensorflowtrainingjobs"' in body["error"]
        status, body = await call("DELETE", f"/api/v1/jobs/{team_a}/tensorflowtrainingjobs/m", bob)
        assert status == 403
        assert 'cannot delete resource "tensorflowtrainingjobs"' in body["error"]
        # Neither may delete a repository (the Role grants no delete on them).
        status, body = await call("DELETE", f"/api/v1/repositories/{team_a}/jobs", alice)
        assert status == 403
        assert hub.calls == []

        status, body = await call("POST", f"/api/v1/repositories/{team_a}/jobs/sync", alice)
        assert status == 202
        status, body = await call("POST", f"/api/v1/repositories/{team_b}/jobs/refresh", bob)
        assert status == 202
        assert hub.calls == [("sync", team_a, "jobs", None), ("refresh", team_b, "jobs")]
        # Alice's job action passes authorization, then the API server has no such job: 404.
        status, body = await call(
            "POST", f"/api/v1/jobs/{team_a}/tensorflowtrainingjobs/m/pause", alice
        )
        assert status == 404


@REAL_RBAC
async def test_a_token_the_cluster_does_not_accept_is_401_and_a_revoked_binding_403_soon(
    admin: Client, teams: tuple[str, str]
) -> None:
    team_a, _ = teams
    alice = await team_token(admin, team_a, "alice")
    hub = FakeHub(repositories=[repository(team_a, "jobs", "https://git.example/a.git")], diffs={})
    app_access = KubeAccess(admin, ttl=0.0)  # no caching: the binding's removal shows at once
    app = api.create_app(
        hub, token=None, webhook_secret=None, allow_remote_writes=False, access=app_access
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as site:
        bearer = {"Authorization": f"Bearer {alice}"}
        response = await site.get(f"/api/v1/repositories/{team_a}/jobs", headers=bearer)
        assert response.status == 200
        await admin.delete(ROLE_BINDINGS, "trainops-user-alice", team_a)

        async def refused() -> bool:
            response = await site.get(f"/api/v1/repositories/{team_a}/jobs", headers=bearer)
            return response.status == 403

        # RBAC's own caches take a moment to see the binding gone.
        await aeventually(refused, timeout=10, interval=0.2)
        response = await site.get(
            "/api/v1/repositories", headers={"Authorization": f"Bearer {alice}x"}
        )
        assert response.status == 401
    with pytest.raises(errors.NotFound):
        await admin.get(ROLE_BINDINGS, "trainops-user-alice", team_a)


@REAL_RBAC
async def test_an_open_stream_ends_once_its_service_account_is_deleted(
    admin: Client, teams: tuple[str, str]
) -> None:
    """Issue 29's finding: after the user's ServiceAccount is deleted its token gets 401, but
    an open stream kept delivering. Now the stream reviews the token every `stream_recheck`
    seconds (TokenReview) and ends within that period once the API server refuses it."""
    team_a, _ = teams
    carol = await team_token(admin, team_a, "carol")
    hub = FakeHub(repositories=[repository(team_a, "jobs", "https://git.example/a.git")], diffs={})
    app = api.create_app(
        hub,
        token=None,
        webhook_secret=None,
        allow_remote_writes=False,
        access=KubeAccess(admin, ttl=0.0),  # no caching: each recheck is a TokenReview
        stream_recheck=1.0,
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as site:
        response = await site.get("/api/v1/stream", headers={"Authorization": f"Bearer {carol}"})
        assert response.status == 200
        assert await read_event(response) == ["retry: 2000"]
        await admin.delete(SERVICE_ACCOUNTS, "carol", team_a)

        async def refused() -> bool:
            answer = await site.get(
                "/api/v1/repositories", headers={"Authorization": f"Bearer {carol}"}
            )
            return answer.status == 401

        await aeventually(refused, timeout=30, interval=0.2)
        refused_at = asyncio.get_running_loop().time()
        lines: list[list[str]] = []
        with pytest.raises(EOFError):
            while True:
                lines.append(await read_event(response, timeout=10))
        assert lines[-1] == [": the token is no longer valid"]
        assert asyncio.get_running_loop().time() - refused_at < 1.0 + 2.0


RBAC = Path(__file__).resolve().parents[2] / "deploy" / "gitops" / "rbac.yaml"


@REAL_RBAC
async def test_the_rights_of_deploy_gitops_are_enough_to_review_tokens_and_access(
    cluster: Cluster, admin: Client, teams: tuple[str, str], tmp_path: Path
) -> None:
    """deploy/gitops/rbac.yaml bound to a ServiceAccount: with its token, `KubeAccess` names
    another account's token and asks what that account may do."""
    team_a, team_b = teams
    suffix = uuid.uuid4().hex[:6]
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            meta["name"] += f"-{suffix}"
        else:
            meta["namespace"] = team_a
        if "roleRef" in doc:
            if doc["roleRef"]["kind"] == "ClusterRole":
                doc["roleRef"]["name"] += f"-{suffix}"
            doc["subjects"][0]["namespace"] = team_a
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    try:
        identity = service_account_kubeconfig(
            cluster, team_a, "trainops-gitops", tmp_path / "gitops.kubeconfig"
        )
        alice = await team_token(admin, team_a, "alice")
        async with await Client.connect(identity.kubeconfig) as own:
            access = KubeAccess(own)
            user = await access.authenticate(alice)
            assert user is not None
            assert user.name == f"system:serviceaccount:{team_a}:alice"
            assert "system:serviceaccounts" in user.groups
            assert await access.authenticate(alice + "x") is None
            patch_a = Check("patch", GROUP, "jobrepositories", team_a, name="jobs")
            patch_b = Check("patch", GROUP, "jobrepositories", team_b, name="jobs")
            assert await access.allowed(user, patch_a) is True
            assert await access.allowed(user, patch_b) is False
    finally:
        for doc in docs:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                cluster.kubectl("delete", doc["kind"], doc["metadata"]["name"], check=False)


async def test_a_token_of_bytes_that_are_no_text_is_401_not_a_500(
    cluster: Cluster, admin: Client
) -> None:
    """Raw bytes, as curl -H $'Authorization: Bearer \\xff\\xfe' sends them (aiohttp's client
    would encode them): they came in as surrogates, which the TokenReview could not encode."""
    async with site_for(FakeHub(), admin) as site:
        port = site.port
        assert port is not None
        for header in (b"Authorization: Bearer \xff\xfe", b"Cookie: trainops-token=\xff\xfe"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"GET /api/v1/repositories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + header
                + b"\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 401 "), answer
            assert body == b'{"error":"the token is not valid"}'
