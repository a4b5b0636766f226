"""The API's authentication and authorization as HTTP, over loopback, with the reviews answered
from a table (`TableAccess`, an `Access` of its own: which token is whose, what each user may do
in which namespace). What the real API servers answer is tests/gitops/test_api_access_cluster.py.

401 without a valid token (with `WWW-Authenticate: Bearer`), 403 in the API server's words, no
data in either; lists and the event stream hold only what the user may list; 503 when the
API server cannot be asked; the caps on open streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gitops.api import routes as api
from gitops.api.reviews import AccessUnavailable
from gitops.api.rules import Check, User
from gitops.runtime.hub import Change
from tests.gitops.test_api import FakeHub, read_event, repository, wait_for

ALICE = User("alice", groups=("team-a",))
ROOT = User("root", groups=("system:masters",))
TOKENS = {"tok-alice": ALICE, "tok-root": ROOT}
# (user, verb, resource, namespace) allowed; ROOT may do anything.
GRANTS = {
    ("alice", "list", "jobrepositories", "team-a"),
    ("alice", "get", "jobrepositories", "team-a"),
    ("alice", "patch", "jobrepositories", "team-a"),
    ("alice", "list", "tensorflowtrainingjobs", "team-a"),
}


class TableAccess:
    def __init__(self) -> None:
        self.asked: list[tuple[str, Check]] = []
        self.down = False
        self.revoked: set[str] = set()
        self.reviews = 0

    async def authenticate(self, token: str) -> User | None:
        if self.down:
            raise AccessUnavailable("connection refused")
        self.reviews += 1
        return None if token in self.revoked else TOKENS.get(token)

    async def allowed(self, user: User, check: Check) -> bool:
        self.asked.append((user.name, check))
        if user is ROOT:
            return True
        return (user.name, check.verb, check.resource, check.namespace) in GRANTS


def hub() -> FakeHub:
    repos = [
        repository("team-a", "jobs", "https://git.example/a.git"),
        repository("team-b", "jobs", "https://git.example/b.git"),
    ]
    jobs = [
        {
            "kind": "TensorFlowTrainingJob",
            "metadata": {"namespace": ns, "name": "m", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {},
            "status": {},
        }
        for ns in ("team-a", "team-b")
    ]
    return FakeHub(repositories=repos, diffs={}, jobs=jobs)


@asynccontextmanager
async def served(
    fake: FakeHub, access: TableAccess, **settings: Any
) -> AsyncIterator[TestClient[Any, Any]]:
    options: dict[str, Any] = {"token": None, "webhook_secret": None, "allow_remote_writes": False}
    app = api.create_app(fake, access=access, **{**options, **settings})
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_without_a_valid_token_every_route_but_the_push_hook_is_401_with_no_data() -> None:
    fake = hub()
    async with served(fake, TableAccess()) as client:
        for method, path in [
            ("GET", "/api/v1/repositories"),
            ("GET", "/api/v1/repositories/team-a/jobs"),
            ("GET", "/api/v1/jobs"),
            ("GET", "/api/v1/stream"),
            ("POST", "/api/v1/repositories/team-a/jobs/sync"),
            ("DELETE", "/api/v1/repositories/team-a/jobs"),
        ]:
            for headers, error in [
                ({}, "a bearer token is required"),
                (bearer("nope"), "the token is not valid"),
                ({"Cookie": "trainops-token=nope"}, "the token is not valid"),
                ({"Authorization": "Basic YTpi"}, "a bearer token is required"),
            ]:
                response = await client.request(method, path, headers=headers)
                assert response.status == 401, (method, path, headers)
                assert response.headers["WWW-Authenticate"] == 'Bearer realm="trainops"'
                assert await response.json() == {"error": error}
        assert fake.calls == []
        # The push hook keeps its own authentication (a signature; none configured here).
        response = await client.post(
            "/api/v1/webhooks/git",
            json={"ref": "refs/heads/main", "repository": {"clone_url": "https://x/y.git"}},
            headers={"X-GitHub-Event": "push"},
        )
        assert response.status == 202, await response.text()


async def test_lists_hold_only_the_namespaces_the_user_may_list() -> None:
    async with served(hub(), TableAccess()) as client:
        response = await client.get("/api/v1/repositories", headers=bearer("tok-alice"))
        items = (await response.json())["items"]
        assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in items] == [
            ("team-a", "jobs")
        ]
        response = await client.get("/api/v1/jobs", headers=bearer("tok-alice"))
        assert [(j["namespace"], j["name"]) for j in (await response.json())["items"]] == [
            ("team-a", "m")
        ]
        response = await client.get("/api/v1/repositories", headers=bearer("tok-root"))
        assert len((await response.json())["items"]) == 2


async def test_an_action_outside_the_users_rights_is_403_in_the_api_servers_words() -> None:
    fake = hub()
    access = TableAccess()
    async with served(fake, access) as client:
        response = await client.post(
            "/api/v1/repositories/team-b/jobs/sync", headers=bearer("tok-alice")
        )
        assert response.status == 403
        assert await response.json() == {
            "error": 'User "alice" cannot patch resource "jobrepositories" in API group '
            '"gitops.trainops.dev" in the namespace "team-b"'
        }
        response = await client.get("/api/v1/repositories/team-b/jobs", headers=bearer("tok-alice"))
        assert response.status == 403
        assert list(await response.json()) == ["error"]  # nothing of the repository
        response = await client.delete(
            "/api/v1/repositories/team-a/jobs", headers=bearer("tok-alice")
        )
        assert response.status == 403
        assert "cannot delete" in (await response.json())["error"]
        assert fake.calls == []
        # Allowed: her own namespace.
        response = await client.post(
            "/api/v1/repositories/team-a/jobs/sync", headers=bearer("tok-alice")
        )
        assert response.status == 202
        assert fake.calls == [("sync", "team-a", "jobs", None)]
        assert (
            "alice",
            Check("patch", "gitops.trainops.dev", "jobrepositories", "team-a", name="jobs"),
        ) in access.asked


async def test_the_event_stream_carries_only_the_users_namespaces() -> None:
    fake = hub()
    async with served(fake, TableAccess()) as client:
        response = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert response.status == 200
        assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(fake.subscribers) == 1)
        for ns in ("team-b", "team-a"):
            obj = repository(ns, "jobs", "https://git.example/x.git")
            fake.subscribers[0].put_nowait(Change("repository", "MODIFIED", obj))
        event = await read_event(response)
        assert event[0] == "event: repository"
        assert '"namespace":"team-a"' in event[1]
        response.close()


async def test_streams_are_capped_per_user_and_in_all() -> None:
    fake = hub()
    async with served(fake, TableAccess(), max_streams=2, max_streams_per_user=1) as client:
        first = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert await read_event(first) == ["retry: 2000"]
        again = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert again.status == 429
        assert "alice" in (await again.json())["error"]
        other = await client.get("/api/v1/stream", headers=bearer("tok-root"))
        assert await read_event(other) == ["retry: 2000"]
        await wait_for(lambda: len(fake.subscribers) == 2)
        third = await client.get("/api/v1/stream", headers=bearer("tok-root"))
        assert third.status == 429
        assert "too many open streams" in (await third.json())["error"]
        first.close()
        await wait_for(lambda: client.app[api.STREAMS].by_user == {"root": 1}, 10.0)
        again = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert await read_event(again) == ["retry: 2000"]
        again.close()
        other.close()


async def test_when_the_api_server_cannot_be_asked_the_answer_is_503_not_a_guess() -> None:
    access = TableAccess()
    access.down = True
    async with served(hub(), access) as client:
        response = await client.get("/api/v1/repositories", headers=bearer("tok-root"))
        assert response.status == 503
        assert await response.json() == {
            "error": "cannot check the token now: the API server did not answer"
        }


@pytest.mark.parametrize("remote", [False, True])
async def test_cross_site_writes_are_refused_even_with_a_valid_token(remote: bool) -> None:
    fake = hub()
    async with served(fake, TableAccess(), allow_remote_writes=remote) as client:
        for headers in (
            {"Origin": "http://evil.example"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            response = await client.post(
                "/api/v1/repositories/team-a/jobs/sync",
                headers={**headers, "Cookie": "trainops-token=tok-root"},
            )
            assert response.status == 403
            assert "cross-site request refused" in (await response.json())["error"]
        assert fake.calls == []


async def test_the_header_and_the_cookie_both_carry_the_token() -> None:
    async with served(hub(), TableAccess()) as client:
        for headers in (bearer("tok-root"), {"Cookie": "trainops-token=tok-root"}):
            response = await client.get("/api/v1/repositories", headers=headers)
            assert response.status == 200


async def test_dashboard_pages_show_only_the_users_namespaces_and_a_403_page_otherwise() -> None:
    import dashboard

    fake = hub()
    app = api.create_app(
        fake, token=None, webhook_secret=None, allow_remote_writes=False, access=TableAccess()
    )
    dashboard.install(app, hub=fake, client=None)  # type: ignore[arg-type]  # pages from the Hub only
    cookie = {"Cookie": "trainops-token=tok-alice"}
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        front = await client.get("/", headers=cookie)
        text = await front.text()
        assert front.status == 200
        assert 'data-repo="team-a/jobs"' in text
        assert "team-b" not in text
        assert '<span class="user" title="signed in as">alice</span>' in text
        denied = await client.get("/repositories/team-b/jobs", headers=cookie)
        text = await denied.text()
        assert denied.status == 403
        assert denied.headers["Content-Type"] == "text/html; charset=utf-8"
        assert (
            "User &#34;alice&#34; cannot get resource &#34;jobrepositories&#34; in API group "
            "&#34;gitops.trainops.dev&#34; in the namespace &#34;team-b&#34;"
        ) in text
        assert "git.example/b.git" not in text
        # The API under the same path prefix stays JSON.
        denied = await client.get("/api/v1/repositories/team-b/jobs", headers=cookie)
        assert denied.headers["Content-Type"] == "application/json"
        assert denied.status == 403


async def test_a_diff_shows_only_objects_its_reader_may_list() -> None:
    """A diff shows the live object: getting the JobRepository is not enough to read it. Alice
    may list ConfigMaps in team-a but not Secrets; a kind discovery never named is withheld."""
    from gitops.runtime.hub import ResourceDiff

    grants = {
        ("alice", "get", "jobrepositories", "team-a"),
        ("alice", "list", "configmaps", "team-a"),
    }
    diffs = [
        ResourceDiff("", "ConfigMap", "team-a", "settings", "a.yaml", 1, "-x\n+y", "configmaps"),
        ResourceDiff("", "Secret", "team-a", "token", "b.yaml", 1, "-a\n+b", "secrets"),
        ResourceDiff("example.com", "Widget", "team-a", "w", "c.yaml", 1, "-c\n+d", ""),
    ]
    fake = FakeHub(
        repositories=[repository("team-a", "jobs", "https://git.example/a.git")],
        diffs={("team-a", "jobs"): diffs},
    )

    class Narrow(TableAccess):
        async def allowed(self, user: User, check: Check) -> bool:
            self.asked.append((user.name, check))
            return (user.name, check.verb, check.resource, check.namespace) in grants

    async with served(fake, Narrow()) as client:
        response = await client.get(
            "/api/v1/repositories/team-a/jobs/diff",
            headers={"Authorization": "Bearer tok-alice"},
        )
        assert response.status == 200
        items = (await response.json())["items"]
    assert [d["name"] for d in items] == ["settings"]
