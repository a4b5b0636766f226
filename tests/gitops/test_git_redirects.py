"""Credentials go only where they are bound, against real servers on loopback: a Git host over
smart HTTP (`git http-backend`, Basic authentication) that redirects — every 3xx, before or
after authentication — to another host (127.0.0.2), another port, another path or a
dot-segment path on the same server (which resolves `..` and `%2e%2e`, as a careless one does).
Every Authorization header each server receives is recorded: the bound credentials reach no
request outside the binding, and a redirect inside it still works."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gitops.engine.urls import Credentials, GitError
from gitops.source.git import Git
from tests.gitops.test_git import git
from tests.support.githttp import GitHttp, serve_git_http

USER, PASSWORD = "alice", "SUPERSECRET-PW"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
STATUSES = (301, 302, 303, 307, 308)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """team-a/x.git, team-a/y.git and team-b/x.git, each with one commit."""
    top = tmp_path / "repos"
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "f").write_text("x\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "one")
    for name in ("team-a/x.git", "team-a/y.git", "team-b/x.git"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        git(tmp_path, "clone", "-q", "--bare", str(work), str(top / name))
    return top


def bound(base: str) -> Credentials:
    return Credentials(username=USER, password=PASSWORD, bound_to=f"{base}/team-a")


def sent(server: GitHttp, outside: Callable[[str], bool] = lambda _: True) -> list[str]:
    """The paths of the requests outside the binding that carried credentials."""
    return [path for path, auth in server.requests if auth is not None and outside(path)]


@contextlib.asynccontextmanager
async def origin_to(
    root: Path, target: Callable[[str], str | None], status: int, *, after_auth: bool = False
) -> AsyncIterator[GitHttp]:
    async with serve_git_http(
        root,
        username=USER,
        password=PASSWORD,
        redirect=target,
        redirect_status=status,
        redirect_after_auth=after_auth,
    ) as origin:
        yield origin


@pytest.mark.parametrize("after_auth", [False, True], ids=["before-auth", "after-auth"])
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("elsewhere", ["other-host", "other-port"])
async def test_a_redirect_to_another_host_or_port_gets_no_credentials(
    root: Path, tmp_path: Path, status: int, elsewhere: str, after_auth: bool
) -> None:
    host = "127.0.0.2" if elsewhere == "other-host" else "127.0.0.1"
    async with (
        serve_git_http(root, username=USER, password=PASSWORD, host=host) as sink,
        origin_to(root, lambda p: sink.base + p, status, after_auth=after_auth) as o,
    ):
        client = Git(tmp_path / "cache", timeout=30)
        with pytest.raises(GitError, match="authentication failed"):
            await client.fetch(f"{o.base}/team-a/x.git", "main", bound(o.base))
    assert sink.requests, "git did not follow the redirect: the test shows nothing"
    assert sent(sink) == []  # not one request to the other server carried the credentials
    assert sink.authorizations == [None] * len(sink.authorizations)
    if after_auth:  # the origin itself, under the binding, was given them
        assert BASIC in o.authorizations


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize(
    "path",
    ["/team-b/x.git", "/team-a/../team-b/x.git", "/team-a/%2e%2e/team-b/x.git", "/team-ab/x.git"],
)
async def test_a_redirect_outside_the_bound_path_on_the_same_server_gets_no_credentials(
    root: Path, tmp_path: Path, status: int, path: str
) -> None:
    def target(p: str) -> str | None:
        return (o.base + p.replace("/team-a/x.git", path, 1)) if p.startswith("/team-a/") else None

    async with origin_to(root, target, status) as o:
        client = Git(tmp_path / "cache", timeout=30)
        with pytest.raises(GitError, match="authentication failed"):
            await client.fetch(f"{o.base}/team-a/x.git", "main", bound(o.base))
    outside = [p for p, _ in o.requests if not p.startswith("/team-a/")]
    assert outside, "git did not follow the redirect: the test shows nothing"
    assert sent(o, lambda p: not p.startswith("/team-a/")) == []


@pytest.mark.parametrize("status", STATUSES)
async def test_a_redirect_inside_the_binding_is_followed_with_the_credentials(
    root: Path, tmp_path: Path, status: int
) -> None:
    def target(p: str) -> str | None:
        return o.base + p.replace("/x.git", "/y.git", 1) if p.startswith("/team-a/x.git") else None

    async with origin_to(root, target, status) as o:
        client = Git(tmp_path / "cache", timeout=30)
        ref, _ = await client.fetch(f"{o.base}/team-a/x.git", "main", bound(o.base))
    assert ref.ref == "refs/heads/main"
    assert ("/team-a/y.git/info/refs", BASIC) in o.requests


@pytest.mark.parametrize(
    "path",
    [
        "/team-a/../team-b/x.git",
        "/team-a/%2e%2e/team-b/x.git",
        "/team-a/%2E%2e/team-b/x.git",
        "/team-a/%252e%252e/team-b/x.git",
        "/team-a/..%2fteam-b/x.git",
        "/team-a%2f..%2fteam-b/x.git",
        "/team-a/..;/team-b/x.git",
        "/team-ab/x.git",
        "/team-b/x.git",
    ],
)
async def test_a_repository_url_outside_the_binding_is_refused_before_git_runs(
    root: Path, tmp_path: Path, path: str
) -> None:
    async with serve_git_http(root, username=USER, password=PASSWORD) as server:
        client = Git(tmp_path / "cache", timeout=30)
        with pytest.raises(GitError, match=r"not sent there|not bound"):
            await client.ls_remote(server.base + path, bound(server.base))
    assert server.requests == []


async def test_credentials_bound_to_one_port_are_not_used_on_another(
    root: Path, tmp_path: Path
) -> None:
    async with serve_git_http(root, username=USER, password=PASSWORD) as other:
        creds = Credentials(username=USER, password=PASSWORD, bound_to="http://127.0.0.1:1/team-a")
        client = Git(tmp_path / "cache", timeout=30)
        with pytest.raises(GitError, match="not sent there"):
            await client.ls_remote(other.url_of("team-a/x.git"), creds)
    assert other.requests == []


async def test_credentials_in_the_url_itself_do_not_follow_a_redirect_elsewhere(
    root: Path, tmp_path: Path
) -> None:
    async with (
        serve_git_http(root, username=USER, password=PASSWORD, host="127.0.0.2") as sink,
        origin_to(root, lambda p: sink.base + p, 302) as o,
    ):
        url = o.base.replace("://", f"://{USER}:{PASSWORD}@") + "/team-a/x.git"
        client = Git(tmp_path / "cache", timeout=30)
        with pytest.raises(GitError) as caught:
            await client.ls_remote(url)
    assert PASSWORD not in caught.value.message
    assert sink.requests and sent(sink) == []
