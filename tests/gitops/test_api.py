"""The GitOps HTTP API over loopback: every route's content, errors, security rules, the event
stream and push webhooks.

The reconciler is written alongside this API, so `FakeHub` is a real (small) implementation of
`gitops.runtime.hub.Hub` fed with fixture JobRepositories: it records the actions asked of it, and
`publish` feeds every open `changes()` subscription. End-to-end tests against the reconciler
come later."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import json
import logging
import os
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gitops.api import routes as api
from gitops.api.auth import bearer_matches, cross_site, host_name, is_loopback
from gitops.engine.urls import GitError, normalize_repo_url, validate_revision
from gitops.runtime.hub import Change, Hub, ResourceDiff, UnknownRepository
from gitops.source.pushhooks import PushCheck, PushEvent

SECRET = b"hook-secret"
TOKEN = "api-token-123"
MiB = 1024 * 1024
EVIL = {"Origin": "https://evil.example"}
SHA = "0123456789abcdef0123456789abcdef01234567"


def repository(
    namespace: str,
    name: str,
    url: str,
    *,
    revision: str = "main",
    sync: str = "Synced",
    health: str = "Healthy",
    sha: str = SHA,
    created: str = "2024-01-01T00:00:00Z",
) -> dict[str, Any]:
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": created},
        "spec": {"repoURL": url, "targetRevision": revision, "path": "jobs"},
        "status": {
            "sync": {"status": sync, "revision": sha, "shortRevision": sha[:7]},
            "health": {"status": health},
        },
    }


def fixture_repositories() -> list[dict[str, Any]]:
    return [
        repository("default", "jobs", "https://github.com/org/jobs.git"),
        repository(
            "default",
            "private",
            "https://x-access-token:ghp_SECRET@github.com/org/private.git",
            revision="dev",
            sync="OutOfSync",
            health="Progressing",
            sha="fedcba9876543210fedcba9876543210fedcba98",
        ),
        repository("team-a", "models", "git@gitlab.example.com:g/models.git"),
    ]


DIFF = ResourceDiff(
    group="batch.tensorstack.dev",
    kind="TensorFlowTrainingJob",
    namespace="default",
    name="mnist",
    file="jobs/mnist.yaml",
    line=4,
    text="--- live\n+++ desired\n@@ -1 +1 @@\n-replicas: 1\n+replicas: 2\n",
)

JOBS: list[dict[str, Any]] = [
    {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {
            "namespace": "default",
            "name": "mnist",
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "annotations": {"gitops.trainops.dev/repository": "default/jobs"},
        },
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2}, {"type": "ps"}]},
        "status": {"phase": "Running", "readyReplicas": "2/3", "backoffCount": 1},
    },
    {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "XGBoostTrainingJob",
        "metadata": {
            "namespace": "default",
            "name": "iris",
            "creationTimestamp": "2024-01-03T00:00:00Z",
        },
        "spec": {
            "replicaSpecs": [{"type": "master", "replicas": 1}, {"type": "worker", "replicas": 2}]
        },
        "status": {
            "tasks": [{"type": "worker", "replicas": [{"phase": "Running"}, {"phase": "Pending"}]}]
        },
    },
]


class FakeHub:
    """A `Hub` over fixture objects that records what it is asked to do."""

    def __init__(
        self,
        repositories: list[dict[str, Any]] | None = None,
        diffs: dict[tuple[str, str], list[ResourceDiff]] | None = None,
        jobs: list[dict[str, Any]] | None = None,
    ) -> None:
        repos = fixture_repositories() if repositories is None else repositories
        self.repos = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in repos}
        self.diffs = {("default", "private"): [DIFF]} if diffs is None else diffs
        self.job_list = copy.deepcopy(JOBS) if jobs is None else jobs
        self.calls: list[tuple[Any, ...]] = []
        self.subscribers: list[asyncio.Queue[Change]] = []
        self.fail: Exception | None = None
        self.push_secrets: dict[str, bytes] = {}
        self.refreshed: list[str] = []
        """A repository's own push secret's value (b"": named but unreadable)."""

    def _known(self, namespace: str, name: str) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        try:
            return self.repos[(namespace, name)]
        except KeyError:
            raise UnknownRepository(f"{namespace}/{name}") from None

    def repositories(self) -> list[dict[str, Any]]:
        if self.fail is not None:
            raise self.fail
        return [copy.deepcopy(self.repos[k]) for k in sorted(self.repos)]

    def repository(self, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self._known(namespace, name))

    def diff(self, namespace: str, name: str) -> list[ResourceDiff]:
        self._known(namespace, name)
        return list(self.diffs.get((namespace, name), []))

    def jobs(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.job_list)

    async def refresh(self, namespace: str, name: str) -> None:
        self._known(namespace, name)
        self.calls.append(("refresh", namespace, name))

    async def delete(self, namespace: str, name: str) -> None:
        self._known(namespace, name)
        del self.repos[(namespace, name)]
        self.calls.append(("delete", namespace, name))

    async def sync(self, namespace: str, name: str, revision: str | None = None) -> None:
        self._known(namespace, name)
        try:
            validate_revision(revision)
        except GitError as e:
            raise ValueError(e.message) from None
        self.calls.append(("sync", namespace, name, revision))

    async def push(self, event: PushEvent, check: PushCheck) -> list[str]:
        """As the reconciler's: URL, then the repository's own push secret (`push_secrets`,
        by namespace/name), then the branch."""
        self.calls.append(("push", event))
        matched = []
        for (namespace, name), obj in sorted(self.repos.items()):
            spec = obj["spec"]
            if normalize_repo_url(spec["repoURL"]) not in event.repo_urls:
                continue
            if not check.admits(self.push_secrets.get(f"{namespace}/{name}")):
                continue
            if event.branch == spec.get("targetRevision"):
                matched.append(f"{namespace}/{name}")
        self.refreshed += matched
        return matched

    async def changes(self) -> AsyncIterator[Change]:
        queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=100)
        self.subscribers.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self.subscribers.remove(queue)

    def publish(self, change: Change) -> None:
        for queue in self.subscribers:
            queue.put_nowait(change)


def masked(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["repoURL"] = out["spec"]["repoURL"].replace("x-access-token:ghp_SECRET@", "***@")
    return out


@asynccontextmanager
async def client_for(hub: Hub | None = None, **options: Any) -> AsyncIterator[TestClient[Any, Any]]:
    settings: dict[str, Any] = {"token": None, "webhook_secret": None, "allow_remote_writes": False}
    settings.update(options)
    app = api.create_app(hub if hub is not None else FakeHub(), **settings)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def body(response: aiohttp.ClientResponse) -> Any:
    assert response.content_type == "application/json", await response.text()
    return json.loads(await response.text())


# --- reads ---------------------------------------------------------------------------------------


async def test_repositories_lists_every_object_with_status_and_userinfo_masked() -> None:
    async with client_for() as client:
        response = await client.get("/api/v1/repositories")
        assert response.status == 200
        items = (await body(response))["items"]
    assert items == [masked(r) for r in fixture_repositories()]
    assert "ghp_SECRET" not in json.dumps(items)
    assert items[1]["spec"]["repoURL"] == "https://***@github.com/org/private.git"


async def test_one_repository_and_404_for_an_unknown_one() -> None:
    async with client_for() as client:
        response = await client.get("/api/v1/repositories/team-a/models")
        assert response.status == 200
        assert await body(response) == fixture_repositories()[2]
        response = await client.get("/api/v1/repositories/default/nope")
        assert response.status == 404
        assert await body(response) == {"error": "jobrepository default/nope not found"}


async def test_diff_lists_resource_diffs_and_404_for_an_unknown_repository() -> None:
    async with client_for() as client:
        response = await client.get("/api/v1/repositories/default/private/diff")
        assert (await body(response)) == {"items": [asdict(DIFF)]}
        response = await client.get("/api/v1/repositories/default/jobs/diff")
        assert (await body(response)) == {"items": []}
        response = await client.get("/api/v1/repositories/x/y/diff")
        assert response.status == 404
        assert await body(response) == {"error": "jobrepository x/y not found"}


async def test_jobs_are_rows_with_replicas_restarts_and_repository() -> None:
    async with client_for() as client:
        response = await client.get("/api/v1/jobs")
        assert response.status == 200
        items = (await body(response))["items"]
    assert items == [
        {
            "kind": "XGBoostTrainingJob",
            "namespace": "default",
            "name": "iris",
            "phase": None,
            "replicas": "1/3",  # computed: no readyReplicas yet
            "restarts": 0,
            "repository": None,
            "createdAt": "2024-01-03T00:00:00Z",
        },
        {
            "kind": "TensorFlowTrainingJob",
            "namespace": "default",
            "name": "mnist",
            "phase": "Running",
            "replicas": "2/3",
            "restarts": 1,
            "repository": "default/jobs",
            "createdAt": "2024-01-02T03:04:05Z",
        },
    ]


async def test_unknown_endpoints_and_methods_answer_json() -> None:
    async with client_for() as client:
        response = await client.get("/api/v1/nothing")
        assert response.status == 404
        assert await body(response) == {"error": "no such endpoint: GET /api/v1/nothing"}
        response = await client.delete("/api/v1/repositories")
        assert response.status == 405
        assert "GET" in response.headers["Allow"]
        assert (await body(response))["error"].startswith("method DELETE not allowed")


async def test_an_unexpected_exception_is_a_500_without_details_and_a_logged_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = FakeHub()
    hub.fail = RuntimeError("secret internals")
    with caplog.at_level(logging.ERROR, logger="gitops.api.routes"):
        async with client_for(hub) as client:
            for method, path in (
                ("GET", "/api/v1/repositories"),
                ("GET", "/api/v1/repositories/default/jobs"),
                ("POST", "/api/v1/repositories/default/jobs/sync"),
            ):
                response = await client.request(method, path)
                assert response.status == 500
                assert await body(response) == {"error": "internal error"}
    assert "secret internals" in caplog.text
    assert "Traceback" in caplog.text


async def test_a_client_that_leaves_mid_body_logs_no_error_and_the_api_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = "POST /api/v1/webhooks/git: the client closed the connection mid-body"
    app = api.create_app(FakeHub(), token=None, webhook_secret=b"s3cret", allow_remote_writes=False)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    try:
        with caplog.at_level(logging.DEBUG):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /api/v1/webhooks/git HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue"
                b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            # 100 Continue: the request reached its handler, which reads the body next.
            async with asyncio.timeout(5):
                assert (await reader.readline()).startswith(b"HTTP/1.1 100 ")
            writer.write(b'{"ref":')
            await writer.drain()
            writer.transport.abort()
            async with asyncio.timeout(5):
                while gone not in caplog.text:
                    await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{port}/api/v1/repositories"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
    finally:
        await runner.cleanup()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# --- actions -------------------------------------------------------------------------------------


async def test_sync_queues_with_and_without_a_revision() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post("/api/v1/repositories/default/jobs/sync")
        assert response.status == 202
        assert await body(response) == {
            "status": "queued",
            "repository": "default/jobs",
            "revision": None,
        }
        response = await client.post(
            "/api/v1/repositories/team-a/models/sync", json={"revision": "abc1234"}
        )
        assert response.status == 202
        assert (await body(response))["status"] == "queued"
    assert hub.calls == [("sync", "default", "jobs", None), ("sync", "team-a", "models", "abc1234")]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{not json", "the body is not valid JSON"),
        (b"[1]", 'the body must be a JSON object, e.g. {"revision": "main"}'),
        (b'{"revision": 3}', "revision must be a non-empty string"),
        (b'{"revision": ""}', "revision must be a non-empty string"),
        (b'{"rev": "main"}', "unknown field 'rev' (only 'revision' is accepted)"),
    ],
)
async def test_sync_refuses_a_bad_body(payload: bytes, message: str) -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post("/api/v1/repositories/default/jobs/sync", data=payload)
        assert response.status == 400
        assert await body(response) == {"error": message}
    assert hub.calls == []


async def test_sync_answers_400_with_the_hubs_message_for_a_bad_revision_and_404_unknown() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post(
            "/api/v1/repositories/default/jobs/sync", json={"revision": "a..b"}
        )
        assert response.status == 400
        error = (await body(response))["error"]
        assert error.startswith("invalid revision")
        response = await client.post("/api/v1/repositories/default/gone/sync")
        assert response.status == 404
        assert await body(response) == {"error": "jobrepository default/gone not found"}
    assert hub.calls == []


async def test_refresh_queues_and_404_for_an_unknown_repository() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post("/api/v1/repositories/default/private/refresh")
        assert response.status == 202
        assert await body(response) == {"status": "queued", "repository": "default/private"}
        response = await client.post("/api/v1/repositories/default/gone/refresh")
        assert response.status == 404
    assert hub.calls == [("refresh", "default", "private")]


async def test_delete_removes_the_repository_404_for_an_unknown_one_and_needs_the_token() -> None:
    hub = FakeHub()
    async with client_for(hub, token=TOKEN) as client:
        path = "/api/v1/repositories/default/private"
        response = await client.delete(path)
        assert response.status == 401
        response = await client.delete(path, headers={"Origin": "https://evil.example"})
        assert response.status == 403
        auth = {"Authorization": f"Bearer {TOKEN}"}
        response = await client.delete(path, headers=auth)
        assert response.status == 200
        assert await body(response) == {"status": "deleted", "repository": "default/private"}
        assert (await client.get(path)).status == 404
        response = await client.delete(path, headers=auth)
        assert response.status == 404
        assert await body(response) == {"error": "jobrepository default/private not found"}
    assert hub.calls == [("delete", "default", "private")]


async def test_bodies_over_the_cap_get_413_whatever_content_length_says() -> None:
    hub = FakeHub()
    async with client_for(hub, max_body_bytes=100, webhook_secret=SECRET) as client:
        big = b'{"revision": "' + b"a" * 200 + b'"}'
        response = await client.post("/api/v1/repositories/default/jobs/sync", data=big)
        assert response.status == 413
        assert await body(response) == {"error": "request body larger than the limit of 100 bytes"}

        async def chunks() -> AsyncIterator[bytes]:  # chunked: no Content-Length at all
            for _ in range(10):
                yield b" " * 50

        response = await client.post("/api/v1/webhooks/git", data=chunks())
        assert response.status == 413
        assert (await body(response))["error"].startswith("request body larger")
    assert hub.calls == []


# --- security ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:1"},  # another local web app
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
)
async def test_cross_site_posts_are_refused(headers: dict[str, str]) -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        for path in (
            "/api/v1/repositories/default/jobs/sync",
            "/api/v1/repositories/default/jobs/refresh",
            "/api/v1/webhooks/git",
        ):
            response = await client.post(path, headers=headers, data=b"{}")
            assert response.status == 403, path
            assert (await body(response))["error"].startswith("cross-site request refused")
    assert hub.calls == []


async def test_same_origin_posts_are_accepted() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        origin = f"http://127.0.0.1:{client.port}"
        response = await client.post(
            "/api/v1/repositories/default/jobs/sync",
            headers={"Origin": origin, "Sec-Fetch-Site": "same-origin"},
        )
        assert response.status == 202
    assert hub.calls == [("sync", "default", "jobs", None)]


async def test_beyond_loopback_a_token_is_mandatory() -> None:
    with pytest.raises(ValueError, match="needs a token"):
        api.create_app(FakeHub(), token=None, webhook_secret=None, allow_remote_writes=True)
    app = api.create_app(FakeHub(), token=None, webhook_secret=None, allow_remote_writes=False)
    with pytest.raises(ValueError, match="beyond loopback"):
        await api.serve(app, "0.0.0.0", 0)


@pytest.mark.parametrize("remote", [True, False])
async def test_with_a_token_mutating_calls_need_it(remote: bool) -> None:
    hub = FakeHub()
    async with client_for(hub, token=TOKEN, allow_remote_writes=remote) as client:
        path = "/api/v1/repositories/default/jobs/sync"
        response = await client.post(path)
        assert response.status == 401
        assert await body(response) == {"error": "a bearer token is required"}
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="trainops"'
        response = await client.post(path, headers={"Authorization": "Bearer wrong"})
        assert response.status == 401
        assert await body(response) == {"error": "the token does not match"}
        response = await client.post(path, headers={"Authorization": f"Basic {TOKEN}"})
        assert response.status == 401
        response = await client.post(
            "/api/v1/repositories/default/jobs/refresh", headers={"Authorization": "Bearer x"}
        )
        assert response.status == 401
        assert hub.calls == []
        response = await client.post(path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status == 202
        # Reads and the push hook (it has its own secret) need no token.
        assert (await client.get("/api/v1/repositories")).status == 200
        response = await client.post(
            "/api/v1/webhooks/git",
            json={"repository": "https://github.com/org/jobs", "branch": "main"},
        )
        assert response.status == 202
        assert await body(response) == {"refreshed": 1}


def from_peer(address: str) -> Any:
    """A middleware (put first) that makes every request look as if it came from `address`:
    tests listen on loopback only, so a remote peer is played, never reached."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        response: web.StreamResponse = await handler(request.clone(remote=address))
        return response

    return middleware


async def _changed(request: web.Request) -> web.Response:
    request.app[CHANGED].append(request.method)
    return web.json_response({"changed": True}, status=202)


CHANGED = web.AppKey("changed", list)


@asynccontextmanager
async def app_with_a_route_of_its_own(
    peer: str | None = None, **options: Any
) -> AsyncIterator[tuple[TestClient[Any, Any], list[str]]]:
    """The API app plus a write route another package adds (as the dashboard adds pause,
    resume and delete): the guard must cover it without being told about it."""
    settings: dict[str, Any] = {"token": None, "webhook_secret": None, "allow_remote_writes": False}
    settings.update(options)
    app = api.create_app(FakeHub(), **settings)
    if peer is not None:
        app.middlewares.insert(0, from_peer(peer))
    app[CHANGED] = []
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        app.router.add_route(method, "/api/v1/things/{name}", _changed)
    app.router.add_get("/api/v1/things/{name}", _changed)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client, app[CHANGED]


WRITES = ("POST", "PUT", "PATCH", "DELETE")
PLAYED_PEER = "203.0.113.7"  # TEST-NET-3: a string in request.remote, never an address used


@pytest.mark.parametrize("method", WRITES)
async def test_any_route_written_to_is_guarded_by_method_not_by_name(method: str) -> None:
    async with app_with_a_route_of_its_own(peer=PLAYED_PEER) as (client, changed):
        response = await client.request(method, "/api/v1/things/x")
        assert response.status == 403
        assert await body(response) == {"error": "changes are accepted from this machine only"}
        assert (await client.get("/api/v1/things/x")).status == 202  # reads stay open
        # The push hook keeps its exemption: it has its own secret.
        response = await client.post(
            "/api/v1/webhooks/git",
            json={"repository": "https://github.com/org/jobs", "branch": "main"},
        )
        assert response.status == 202
    assert changed == ["GET"]
    async with app_with_a_route_of_its_own(token=TOKEN) as (client, changed):
        response = await client.request(method, "/api/v1/things/x")
        assert response.status == 401
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="trainops"'
        response = await client.request(
            method, "/api/v1/things/x", headers={"Authorization": f"Bearer {TOKEN}", **EVIL}
        )
        assert response.status == 403
        assert (await body(response))["error"].startswith("cross-site request refused")
        response = await client.request(
            method, "/api/v1/things/x", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert response.status == 202
    assert changed == [method]


async def test_sync_from_another_machine_is_refused_on_loopback_but_not_beyond() -> None:
    async with app_with_a_route_of_its_own(peer=PLAYED_PEER) as (client, _):
        response = await client.post("/api/v1/repositories/default/jobs/sync")
        assert response.status == 403
    remote = {"token": TOKEN, "allow_remote_writes": True}
    async with app_with_a_route_of_its_own(peer=PLAYED_PEER, **remote) as (client, changed):
        response = await client.post(
            "/api/v1/things/x", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert response.status == 202
    assert changed == ["POST"]


async def test_on_loopback_without_a_token_writes_are_open() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post("/api/v1/repositories/default/jobs/refresh")
        assert response.status == 202


async def test_on_loopback_a_foreign_host_name_is_refused_but_not_for_the_push_hook() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.get("/api/v1/repositories", headers={"Host": "evil.example"})
        assert response.status == 403
        assert "loopback names only" in (await body(response))["error"]
        response = await client.post(
            "/api/v1/repositories/default/jobs/sync", headers={"Host": "rebound.example:80"}
        )
        assert response.status == 403
        for host in ("localhost", f"localhost:{client.port}", "[::1]:80", "app.localhost"):
            response = await client.get("/api/v1/jobs", headers={"Host": host})
            assert response.status == 200, host
        response = await client.post(
            "/api/v1/webhooks/git",
            headers={"Host": "tunnel.example"},
            json={"repository": "https://github.com/org/jobs", "branch": "main"},
        )
        assert response.status == 202
    assert hub.calls and hub.calls[0][0] == "push"
    assert len(hub.calls) == 1


async def test_beyond_loopback_any_host_name_is_served() -> None:
    async with client_for(token=TOKEN, allow_remote_writes=True) as client:
        response = await client.get("/api/v1/jobs", headers={"Host": "trainops.example.com"})
        assert response.status == 200


# --- push webhooks -------------------------------------------------------------------------------

GITHUB_PUSH = json.dumps(
    {
        "ref": "refs/heads/main",
        "after": "a" * 40,
        "repository": {
            "clone_url": "https://github.com/org/jobs.git",
            "ssh_url": "git@github.com:org/jobs.git",
            "html_url": "https://github.com/org/jobs",
        },
    }
).encode()
GITLAB_PUSH = json.dumps(
    {
        "ref": "refs/heads/main",
        "checkout_sha": "b" * 40,
        "project": {
            "git_http_url": "https://gitlab.example.com/g/models.git",
            "git_ssh_url": "git@gitlab.example.com:g/models.git",
            "web_url": "https://gitlab.example.com/g/models",
        },
    }
).encode()
GITEA_PUSH = json.dumps(
    {
        "ref": "refs/heads/dev",
        "after": "c" * 40,
        "repository": {"clone_url": "https://github.com/org/private.git"},
    }
).encode()


def hexmac(body: bytes, secret: bytes = SECRET) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def pushes(hub: FakeHub) -> list[PushEvent]:
    return [c[1] for c in hub.calls if c[0] == "push"]


def refreshed(hub: FakeHub) -> list[str]:
    return hub.refreshed


@pytest.mark.parametrize(
    ("headers", "payload", "refreshed", "expected"),
    [
        (
            {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hexmac(GITHUB_PUSH)},
            GITHUB_PUSH,
            1,
            PushEvent(
                "github",
                ("https://github.com/org/jobs", "ssh://github.com/org/jobs"),
                "main",
                "a" * 40,
            ),
        ),
        (
            {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET.decode()},
            GITLAB_PUSH,
            1,
            PushEvent(
                "gitlab",
                ("https://gitlab.example.com/g/models", "ssh://gitlab.example.com/g/models"),
                "main",
                "b" * 40,
            ),
        ),
        (
            {"X-Gitea-Event": "push", "X-Gitea-Signature": hexmac(GITEA_PUSH)},
            GITEA_PUSH,
            1,
            PushEvent("gitea", ("https://github.com/org/private",), "dev", "c" * 40),
        ),
        (
            {"X-Trainops-Token": SECRET.decode(), "Content-Type": "application/json"},
            b'{"repository": "https://GITHUB.com/org/jobs/", "branch": "main"}',
            1,
            PushEvent("generic", ("https://github.com/org/jobs",), "main", None),
        ),
    ],
    ids=["github", "gitlab", "gitea", "generic"],
)
async def test_signed_pushes_refresh_the_matching_repositories(
    headers: dict[str, str], payload: bytes, refreshed: int, expected: PushEvent
) -> None:
    hub = FakeHub()
    async with client_for(hub, webhook_secret=SECRET) as client:
        response = await client.post("/api/v1/webhooks/git", data=payload, headers=headers)
        assert response.status == 202
        assert await body(response) == {"refreshed": refreshed}
    assert pushes(hub) == [expected]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-GitHub-Event": "push"}, "missing signature"),
        (
            {
                "X-GitHub-Event": "push",
                "X-Hub-Signature-256": "sha256=" + hexmac(GITHUB_PUSH, b"x"),
            },
            "signature does not match",
        ),
        ({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "wrong"}, "token does not match"),
        ({"X-Gitlab-Event": "Push Hook"}, "missing token"),
        ({"X-Gitea-Event": "push", "X-Gitea-Signature": "00" * 32}, "signature does not match"),
        ({"X-Forgejo-Event": "push"}, "missing signature"),
        ({}, "missing token"),
        ({"X-Trainops-Token": "nope"}, "token does not match"),
    ],
)
async def test_unsigned_or_badly_signed_pushes_get_401(
    headers: dict[str, str], message: str
) -> None:
    hub = FakeHub()
    async with client_for(hub, webhook_secret=SECRET) as client:
        response = await client.post("/api/v1/webhooks/git", data=GITHUB_PUSH, headers=headers)
        assert response.status == 401
        assert await body(response) == {"error": message}
    assert refreshed(hub) == []


async def test_pings_are_ignored_and_bad_payloads_get_400() -> None:
    hub = FakeHub()
    async with client_for(hub, webhook_secret=SECRET) as client:
        ping = b'{"zen": "Keep it simple."}'
        response = await client.post(
            "/api/v1/webhooks/git",
            data=ping,
            headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=" + hexmac(ping)},
        )
        assert response.status == 200
        assert await body(response) == {"ignored": True}
        bad = b"not json"
        response = await client.post(
            "/api/v1/webhooks/git",
            data=bad,
            headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hexmac(bad)},
        )
        assert response.status == 400
        assert await body(response) == {"error": "the body is not valid JSON"}
        nothing = b'{"ref": "refs/heads/main"}'
        response = await client.post(
            "/api/v1/webhooks/git", data=nothing, headers={"X-Trainops-Token": SECRET.decode()}
        )
        assert response.status == 400
        assert await body(response) == {"error": "the payload names no repository"}
    assert hub.calls == []


async def test_without_a_secret_unsigned_pushes_are_accepted_and_unmatched_ones_refresh_nothing() -> (
    None
):
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.post(
            "/api/v1/webhooks/git",
            data=GITHUB_PUSH,
            headers={"X-GitHub-Event": "push"},
        )
        assert await body(response) == {"refreshed": 1}
        response = await client.post(
            "/api/v1/webhooks/git",
            json={"repository": "https://github.com/org/other", "ref": "refs/heads/main"},
        )
        assert response.status == 202
        assert await body(response) == {"refreshed": 0}
    assert [p.provider for p in pushes(hub)] == ["github", "generic"]


async def test_the_push_hooks_answer_names_no_repository() -> None:
    """An anonymous push (no secret configured) matching repositories of two namespaces
    learns how many it refreshed, not which: no namespace, no name in the body."""
    hub = FakeHub()
    for namespace, name in (("team-a", "train"), ("team-b", "secret-project")):
        hub.repos[(namespace, name)] = {
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"repoURL": "https://github.com/org/shared.git", "targetRevision": "main"},
        }
    async with client_for(hub) as client:
        response = await client.post(
            "/api/v1/webhooks/git",
            json={"repository": "https://github.com/org/shared", "ref": "refs/heads/main"},
        )
        assert response.status == 202
        raw = await response.text()
    assert json.loads(raw) == {"refreshed": 2}
    for word in ("team-a", "team-b", "train", "secret-project"):
        assert word not in raw
    assert len(pushes(hub)) == 1


# --- a repository's own push secret --------------------------------------------------------------

OWN = b"team-a-own-secret"


def shared_url_repositories() -> list[dict[str, Any]]:
    """Three repositories of two namespaces following the same URL and branch."""
    return [
        {
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"repoURL": "https://github.com/org/jobs.git", "targetRevision": "main"},
        }
        for namespace, name in (("team-a", "own"), ("team-a", "plain"), ("team-b", "other"))
    ]


def signed(provider: str, payload: bytes, secret: bytes) -> dict[str, str]:
    """The headers each provider's style of proof puts on a push."""
    return {
        "github": {
            "X-GitHub-Event": "push",
            "X-Hub-Signature-256": "sha256=" + hexmac(payload, secret),
        },
        "gitlab": {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": secret.decode()},
        "gitea": {"X-Gitea-Event": "push", "X-Gitea-Signature": hexmac(payload, secret)},
        "forgejo": {"X-Forgejo-Event": "push", "X-Forgejo-Signature": hexmac(payload, secret)},
        "generic-hmac": {"X-Hub-Signature-256": "sha256=" + hexmac(payload, secret)},
        "generic-token": {"X-Trainops-Token": secret.decode()},
    }[provider]


PAYLOADS = {
    "github": GITHUB_PUSH,
    "gitlab": json.dumps(
        {"ref": "refs/heads/main", "project": {"git_http_url": "https://github.com/org/jobs.git"}}
    ).encode(),
    "gitea": json.dumps(
        {"ref": "refs/heads/main", "repository": {"clone_url": "https://github.com/org/jobs"}}
    ).encode(),
    "forgejo": json.dumps(
        {"ref": "refs/heads/main", "repository": {"clone_url": "https://github.com/org/jobs"}}
    ).encode(),
    "generic-hmac": b'{"repository": "https://github.com/org/jobs", "branch": "main"}',
    "generic-token": b'{"repository": "https://github.com/org/jobs", "branch": "main"}',
}


@pytest.mark.parametrize(
    ("shared", "expected"),
    [(SECRET, ["team-a/own"]), (None, ["team-a/own", "team-a/plain", "team-b/other"])],
    ids=["shared secret", "no shared secret"],
)
@pytest.mark.parametrize("provider", PAYLOADS)
async def test_a_push_proving_a_repositorys_own_secret_triggers_that_repository(
    provider: str, shared: bytes | None, expected: list[str]
) -> None:
    """With a shared secret, only the repository whose secret it proves; without one, also
    the repositories that have no secret (any push triggers those, as before)."""
    hub = FakeHub(shared_url_repositories())
    hub.push_secrets["team-a/own"] = OWN
    payload = PAYLOADS[provider]
    async with client_for(hub, webhook_secret=shared) as client:
        response = await client.post(
            "/api/v1/webhooks/git", data=payload, headers=signed(provider, payload, OWN)
        )
        assert response.status == 202
        assert await body(response) == {"refreshed": len(expected)}
    assert refreshed(hub) == expected


@pytest.mark.parametrize("provider", PAYLOADS)
async def test_the_shared_secret_does_not_trigger_a_repository_with_its_own(provider: str) -> None:
    hub = FakeHub(shared_url_repositories())
    hub.push_secrets["team-a/own"] = OWN
    payload = PAYLOADS[provider]
    async with client_for(hub, webhook_secret=SECRET) as client:
        response = await client.post(
            "/api/v1/webhooks/git", data=payload, headers=signed(provider, payload, SECRET)
        )
        assert response.status == 202
        assert await body(response) == {"refreshed": 2}
    assert refreshed(hub) == ["team-a/plain", "team-b/other"]


@pytest.mark.parametrize(
    ("shared", "status", "expected"),
    [(SECRET, 401, []), (None, 202, ["team-a/plain"])],
    ids=["shared secret", "no shared secret"],
)
@pytest.mark.parametrize(
    ("headers", "payload"),
    [
        ({"X-GitHub-Event": "push"}, GITHUB_PUSH),
        (signed("github", GITHUB_PUSH, b"x"), GITHUB_PUSH),
        # The HMAC under an empty key: what a Secret that cannot be read would "prove".
        (signed("github", GITHUB_PUSH, b""), GITHUB_PUSH),
        (signed("gitlab", PAYLOADS["gitlab"], b"wrong"), PAYLOADS["gitlab"]),
        (signed("gitea", PAYLOADS["gitea"], b"x"), PAYLOADS["gitea"]),
        (signed("generic-token", PAYLOADS["generic-token"], b"x"), PAYLOADS["generic-token"]),
    ],
    ids=["unsigned", "wrongly signed", "empty key", "wrong token", "gitea wrong", "generic"],
)
async def test_an_unproved_push_triggers_no_repository_with_a_secret_and_names_nothing(
    headers: dict[str, str],
    payload: bytes,
    shared: bytes | None,
    status: int,
    expected: list[str],
) -> None:
    hub = FakeHub(shared_url_repositories())
    # team-b/other names a Secret that cannot be read (b""): no push can prove it.
    hub.push_secrets = {"team-a/own": OWN, "team-b/other": b""}
    async with client_for(hub, webhook_secret=shared) as client:
        response = await client.post("/api/v1/webhooks/git", data=payload, headers=headers)
        assert response.status == status
        raw = await response.text()
    assert refreshed(hub) == expected
    for word in ("team", "own", "plain", "other"):
        assert word not in raw


async def test_an_unproved_request_that_is_no_push_is_401_not_400_under_a_shared_secret() -> None:
    hub = FakeHub(shared_url_repositories())
    async with client_for(hub, webhook_secret=SECRET) as client:
        response = await client.post(
            "/api/v1/webhooks/git", data=b"not json", headers={"X-GitHub-Event": "push"}
        )
        assert response.status == 401
        assert await body(response) == {"error": "missing signature"}


# --- the event stream ----------------------------------------------------------------------------


async def read_event(response: aiohttp.ClientResponse, timeout: float = 5.0) -> list[str]:
    """The lines of the next event or comment block (up to the blank line)."""
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        while True:
            raw = await response.content.readline()
            if not raw:
                raise EOFError("stream ended")
            line = raw.decode().rstrip("\n")
            if line == "":
                if lines:
                    return lines
                continue
            lines.append(line)


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_the_stream_sends_each_change_as_an_event() -> None:
    hub = FakeHub()
    async with client_for(hub) as client:
        response = await client.get("/api/v1/stream")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Cache-Control"] == "no-cache"
        assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(hub.subscribers) == 1)
        repo = fixture_repositories()[1]
        hub.publish(Change("repository", "MODIFIED", repo))
        hub.publish(Change("job", "DELETED", JOBS[0]))
        event, data = await read_event(response)
        assert event == "event: repository"
        assert json.loads(data.removeprefix("data: ")) == {
            "type": "MODIFIED",
            "object": masked(repo),
        }
        event, data = await read_event(response)
        assert event == "event: job"
        assert json.loads(data.removeprefix("data: ")) == {"type": "DELETED", "object": JOBS[0]}
        response.close()


async def test_the_stream_sends_heartbeats_when_quiet() -> None:
    async with client_for(heartbeat=0.2) as client:
        response = await client.get("/api/v1/stream")
        assert await read_event(response) == ["retry: 2000"]
        started = time.monotonic()
        assert await read_event(response) == [": ping"]
        assert await read_event(response) == [": ping"]
        assert time.monotonic() - started >= 0.3
        response.close()


async def test_a_client_going_away_ends_its_subscription() -> None:
    hub = FakeHub()
    app = api.create_app(hub, token=None, webhook_secret=None, allow_remote_writes=False)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        responses = [await client.get("/api/v1/stream") for _ in range(2)]
        for response in responses:
            assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(hub.subscribers) == 2 and app[api.STREAMS].open == 2)
        responses[0].close()
        await wait_for(lambda: len(hub.subscribers) == 1 and app[api.STREAMS].open == 1, 4.0)
        hub.publish(Change("job", "ADDED", JOBS[1]))
        event, _ = await read_event(responses[1])
        assert event == "event: job"
        responses[1].close()
        await wait_for(lambda: not hub.subscribers and app[api.STREAMS].open == 0, 4.0)


async def test_a_client_that_stops_reading_is_dropped_after_the_write_timeout() -> None:
    hub = FakeHub()
    app = api.create_app(
        hub, token=None, webhook_secret=None, allow_remote_writes=False, write_timeout=0.5
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.get("/api/v1/stream")
        assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(hub.subscribers) == 1)
        big = {"metadata": {"namespace": "default", "name": "big"}, "blob": "x" * MiB}
        for _ in range(64):  # far more than the socket buffers hold; the client reads none
            hub.publish(Change("job", "MODIFIED", big))
        await wait_for(lambda: not hub.subscribers and app[api.STREAMS].open == 0, 10.0)
        response.close()


async def test_shutting_down_ends_open_streams_at_once() -> None:
    hub = FakeHub()
    app = api.create_app(hub, token=None, webhook_secret=None, allow_remote_writes=False)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    async with aiohttp.ClientSession() as session:
        response = await session.get(f"http://127.0.0.1:{port}/api/v1/stream")
        assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(hub.subscribers) == 1)
        started = time.monotonic()
        await runner.cleanup()
        assert time.monotonic() - started < 2.0
        assert hub.subscribers == []
        with pytest.raises((EOFError, aiohttp.ClientError)):
            await read_event(response, timeout=2.0)
        response.close()


# --- serve, api.json, the pure rules --------------------------------------------------------------


async def test_serve_picks_a_free_port_and_base_url_names_it() -> None:
    runner, port = await api.serve(
        api.create_app(FakeHub(), token=None, webhook_secret=None, allow_remote_writes=False),
        "127.0.0.1",
        0,
    )
    try:
        assert port > 0
        url = api.base_url("127.0.0.1", port)
        async with aiohttp.ClientSession() as session, session.get(url + "/api/v1/jobs") as r:
            assert r.status == 200
    finally:
        await runner.cleanup()
    assert api.base_url("::1", 8080) == "http://[::1]:8080"
    assert api.base_url("0.0.0.0", 80) == "http://127.0.0.1:80"


def test_api_json_round_trip_is_private(tmp_path: Path) -> None:
    assert api.read_address(tmp_path) is None
    path = api.write_address(tmp_path, "http://127.0.0.1:4321", "tok")
    assert path == tmp_path / "api.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": "http://127.0.0.1:4321", "token": "tok"}
    assert api.read_address(tmp_path) == api.ApiAddress("http://127.0.0.1:4321", "tok")
    api.write_address(tmp_path, "http://127.0.0.1:1", None)
    assert api.read_address(tmp_path) == api.ApiAddress("http://127.0.0.1:1", None)
    assert [p.name for p in tmp_path.iterdir()] == ["api.json"]
    api.remove_address(tmp_path)
    api.remove_address(tmp_path)
    assert api.read_address(tmp_path) is None
    (tmp_path / "api.json").write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        api.read_address(tmp_path)
    (tmp_path / "api.json").write_text('{"token": "x"}')
    with pytest.raises(ValueError, match="no url"):
        api.read_address(tmp_path)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("dev.localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.0.2.2", False),
        ("localhost.evil.example", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_host_name_and_cross_site_rules() -> None:
    assert host_name("[::1]:8080") == "::1"
    assert host_name("localhost:80") == "localhost"
    assert host_name("Example.COM") == "example.com"
    h = "127.0.0.1:8080"
    assert cross_site({"Host": h}) is None
    assert cross_site({"Host": h, "Origin": "http://127.0.0.1:8080"}) is None
    assert cross_site({"Host": "a.example", "Origin": "https://a.example:443"}) is None
    assert cross_site({"Host": h, "Sec-Fetch-Site": "same-origin"}) is None
    assert cross_site({"Host": h, "Origin": "http://127.0.0.1:8081"}) is not None
    assert cross_site({"Host": h, "Origin": "http://localhost:8080"}) is not None
    assert cross_site({"Origin": "http://127.0.0.1:8080"}) is not None  # no Host to match
    # Origin null: a sandboxed or cross-site page, unless Sec-Fetch-Site says same-origin (what
    # Chrome sends for the dashboard's own login and logout forms under no-referrer).
    assert cross_site({"Host": h, "Origin": "null"}) is not None
    assert cross_site({"Host": h, "Origin": "null", "Sec-Fetch-Site": "cross-site"}) is not None
    assert cross_site({"Host": h, "Origin": "null", "Sec-Fetch-Site": "same-site"}) is not None
    assert cross_site({"Host": h, "Origin": "null", "Sec-Fetch-Site": "same-origin"}) is None
    assert cross_site({"Host": h, "Origin": "garbage"}) is not None


def test_bearer_matches() -> None:
    assert bearer_matches("Bearer abc", "abc")
    assert bearer_matches("bearer  abc ", "abc")
    assert not bearer_matches("Bearer abd", "abc")
    assert not bearer_matches("Basic abc", "abc")
    assert not bearer_matches(None, "abc")
    assert not bearer_matches("Bearer", "abc")


def test_the_fake_hub_satisfies_the_protocol() -> None:
    hub: Hub = FakeHub()
    assert hub.repositories()[0]["metadata"]["name"] == "jobs"


async def test_a_change_is_sent_as_it_happens_not_at_the_next_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stream wakes on the first of (a change, shutdown), not when both have happened:
    with the poll and the heartbeat an hour long, changes still arrive at once, in order."""
    import gitops.api.stream

    monkeypatch.setattr(gitops.api.stream, "_POLL", 3600.0)
    hub = FakeHub()
    async with client_for(hub, heartbeat=3600.0) as client:
        response = await client.get("/api/v1/stream")
        assert await read_event(response) == ["retry: 2000"]
        await wait_for(lambda: len(hub.subscribers) == 1)
        for job in JOBS[:2]:
            hub.publish(Change("job", "MODIFIED", job))
        for job in JOBS[:2]:
            event, data = await read_event(response, timeout=5.0)
            assert event == "event: job"
            assert json.loads(data.removeprefix("data: "))["object"] == job
        response.close()
