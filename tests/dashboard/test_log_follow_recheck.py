"""A dashboard log follow outlives neither its token nor its user's right to read the log: every
`stream_recheck` seconds it asks again (TokenReview and `get pods/log`, through the API's
access), as `/api/v1/stream` does, and ends with a last line saying why.

The log comes through the session's API server (`pods/log`, proxied to the test's log server as
in test_routes); who each token is and what its user may do are answered by an `Access` of
this test's (a revoked token is no one's; a revoked right is refused), as the event stream's
own test does (tests/gitops/test_api_sessions.py). On a real API server the same reviews are
TokenReviews and SubjectAccessReviews (tests/gitops/test_api_access_cluster.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import dashboard
from gitops.api import routes as api
from gitops.api.reviews import AccessUnavailable
from gitops.api.rules import Check, User
from gitops.runtime.manager import GitOpsReconciler
from kube import resources
from kube.client import Client
from tests.dashboard.test_routes import LogServer, node, replica_pod
from tests.gitops import conftest as gitops_fixtures
from tests.support.cluster import aeventually
from tests.support.jobs import tf_job

crds = gitops_fixtures.crds
kclient = gitops_fixtures.kclient
repo_crd = gitops_fixtures.repo_crd
gitops = gitops_fixtures.gitops
__all__ = ["node"]  # a fixture of test_routes, used here

RECHECK = 0.5
ALICE = User("alice", groups=("team",))


class Reviews:
    """Alice's token and her rights in one namespace; the test revokes either."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.token_valid = True
        self.may_read_logs = True
        self.down = False
        self.reviews = 0

    async def authenticate(self, token: str) -> User | None:
        if self.down:
            raise AccessUnavailable("connection refused")
        self.reviews += 1
        return ALICE if token == "tok-alice" and self.token_valid else None

    async def allowed(self, user: User, check: Check) -> bool:
        if self.down:
            raise AccessUnavailable("connection refused")
        if check.namespace != self.namespace or user != ALICE:
            return False
        return self.may_read_logs or check.subresource != "log"


@pytest.fixture
async def following(
    gitops: GitOpsReconciler,
    kclient: Client,
    namespace: str,
    node: tuple[str, LogServer],
) -> AsyncIterator[tuple[TestClient[Any, Any], Reviews, LogServer, str]]:
    """A job with a quiet replica that ticks, and the dashboard with its reviews."""
    node_name, log_server = node
    body = tf_job(name="quiet")
    body["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, body)
    await replica_pod(kclient, namespace, "quiet", "quiet-worker-0", node_name)
    reviews = Reviews(namespace)
    app = api.create_app(
        gitops,
        token=None,
        webhook_secret=None,
        allow_remote_writes=False,
        access=reviews,
        stream_recheck=RECHECK,
    )
    dashboard.install(app, hub=gitops, client=kclient)
    log_server.speak.set()
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield (
            client,
            reviews,
            log_server,
            f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/quiet/logs",
        )


async def follow(client: TestClient[Any, Any], path: str) -> Any:
    async with asyncio.timeout(10):
        response = await client.get(
            path,
            params={"pod": "quiet-worker-0", "follow": "true"},
            headers={"Authorization": "Bearer tok-alice"},
        )
    assert response.status == 200, await response.text()
    async with asyncio.timeout(10):
        assert await response.content.readline() == b"tick\n"
    return response


async def rest(response: Any) -> list[bytes]:
    """The lines up to the end of the answer."""
    lines = []
    async with asyncio.timeout(10):
        while line := await response.content.readline():
            lines.append(line)
    return lines


@pytest.mark.parametrize(
    ("revoke", "why"),
    [
        ("token_valid", b"[log stream ended: the token is no longer valid]\n"),
        (
            "may_read_logs",
            b'[log stream ended: User "alice" cannot get resource "pods/log" in API group "" '
            b'in the namespace "NS"]\n',
        ),
    ],
    ids=["the token is revoked", "the right to read logs is revoked"],
)
async def test_a_follow_ends_within_the_recheck_period_once_it_no_longer_holds(
    following: tuple[TestClient[Any, Any], Reviews, LogServer, str],
    namespace: str,
    revoke: str,
    why: bytes,
) -> None:
    client, reviews, log_server, path = following
    response = await follow(client, path)
    # While the token holds, the follow goes on across recheck periods, each reviewed.
    before = reviews.reviews
    await aeventually(lambda: reviews.reviews >= before + 3, timeout=10, interval=0.05)
    assert await response.content.readline() == b"tick\n"
    setattr(reviews, revoke, False)
    revoked = time.monotonic()
    lines = await rest(response)
    ended = time.monotonic() - revoked
    assert lines[-1] == why.replace(b"NS", namespace.encode())
    assert set(lines[:-2]) <= {b"tick\n"}
    assert ended < RECHECK + 1.5  # the period, and slack for a loaded machine
    # The upstream pods/log request is closed too, and the stream's slot given back.
    await aeventually(lambda: log_server.following == 0, timeout=10, interval=0.05)
    await aeventually(lambda: client.app[api.STREAMS].open == 0, timeout=10, interval=0.05)


async def test_a_follow_ends_when_its_token_cannot_be_checked(
    following: tuple[TestClient[Any, Any], Reviews, LogServer, str],
) -> None:
    client, reviews, _, path = following
    response = await follow(client, path)
    reviews.down = True
    lines = await rest(response)
    assert lines[-1] == (
        b"[log stream ended: the token cannot be checked now: the API server did not answer]\n"
    )
