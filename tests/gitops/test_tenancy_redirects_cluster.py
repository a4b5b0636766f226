"""The reproduction of issue 29's first finding, end to end: a Secret bound to
`http://127.0.0.1:PORT/team-a`, the server answers 302 to another host (127.0.0.2), and before
the fix `Authorization: Basic alice:SUPERSECRET-PW` arrived there on every poll. Now the
repository fails to authenticate, says so, and the other host sees no credentials over several
polls; a redirect inside the binding still syncs."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gitops.runtime.manager import GitOpsReconciler
from kube import resources
from kube.client import Client
from tests.gitops.conftest import (
    Remote,
    create_repository,
    get_or_none,
    repository,
    tf_job_yaml,
    wait_status,
)
from tests.gitops.test_tenancy_cluster import AUTOMATED, condition, synced, tenant_gitops
from tests.support.cluster import aeventually
from tests.support.githttp import serve_git_http
from tests.support.tenants import DEPLOYER_RULES, service_account

__all__ = ["tenant_gitops"]  # the fixture, imported

USER, PASSWORD = "alice", "SUPERSECRET-PW"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture
async def team_a(remote: Remote, tmp_path: Path) -> AsyncIterator[tuple[Path, str]]:
    """A served root with the remote cloned at team-a/x.git and team-a/moved.git; its sha."""
    sha = remote.commit("a job", {"job.yaml": tf_job_yaml("over-http")})
    root = tmp_path / "served"
    (root / "team-a").mkdir(parents=True)
    for name in ("x.git", "moved.git"):
        Remote.git(tmp_path, "clone", "-q", "--bare", str(remote.bare), str(root / "team-a" / name))
    yield root, sha


async def bound_secret(kclient: Client, namespace: str, prefix: str) -> None:
    await kclient.create(
        resources.SECRETS,
        {
            "metadata": {"name": "git-creds", "namespace": namespace},
            "stringData": {"username": USER, "password": PASSWORD, "url": prefix},
        },
    )


async def test_a_redirect_to_another_host_gets_no_credentials_on_any_poll(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, team_a: tuple[Path, str]
) -> None:
    root, _ = team_a
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    async with (
        serve_git_http(root, username=USER, password=PASSWORD, host="127.0.0.2") as sink,
        serve_git_http(
            root, username=USER, password=PASSWORD, redirect=lambda p: sink.base + p
        ) as origin,
    ):
        await bound_secret(kclient, namespace, origin.base + "/team-a")
        body = repository(
            namespace,
            origin.url_of("team-a/x.git"),
            automated=AUTOMATED,
            serviceAccountName="deployer",
            secretRef={"name": "git-creds"},
        )
        await create_repository(kclient, body)
        st = await wait_status(kclient, namespace, condition("ComparisonError"), timeout=30)
        (cond,) = condition("ComparisonError")(st)
        assert cond["message"].startswith("authentication failed for http://127.0.0.1:")
        assert PASSWORD not in cond["message"]

        def polls() -> bool:  # three rounds' ls-remote followed the redirect
            return len([p for p, _ in sink.requests if p.endswith("/info/refs")]) >= 3

        await aeventually(polls, timeout=60, interval=0.2)
    assert [auth for _, auth in sink.requests] == [None] * len(sink.requests)
    assert await get_or_none(kclient, resources.TFJOBS, "over-http", namespace) is None


async def test_a_redirect_inside_the_binding_syncs_with_the_credentials(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, team_a: tuple[Path, str]
) -> None:
    root, sha = team_a
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)

    def moved(path: str) -> str | None:
        if not path.startswith("/team-a/x.git/"):
            return None
        return origin.base + path.replace("/x.git/", "/moved.git/", 1)

    async with serve_git_http(root, username=USER, password=PASSWORD, redirect=moved) as origin:
        await bound_secret(kclient, namespace, origin.base + "/team-a")
        body = repository(
            namespace,
            origin.url_of("team-a/x.git"),
            automated=AUTOMATED,
            serviceAccountName="deployer",
            secretRef={"name": "git-creds"},
        )
        await create_repository(kclient, body)
        await wait_status(kclient, namespace, synced(sha), timeout=60)
    assert await get_or_none(kclient, resources.TFJOBS, "over-http", namespace) is not None
    assert ("/team-a/moved.git/info/refs", BASIC) in origin.requests
