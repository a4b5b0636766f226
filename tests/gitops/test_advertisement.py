"""`gitops.source.advertisement`: an anonymous http(s) remote's refs from one in-process GET.

The parser is table-tested on hand-made bodies; the whole way against `git http-backend` behind
a loopback server (tests/support/githttp.py), where what it returns is compared with what
`git ls-remote --symref` itself prints for the same remote, and the server's request log shows
which way was taken (git asks with protocol v2: a GET and a POST; the in-process read is one
GET). Everything unusual — a redirect, a 401, a dumb server, an oversized or malformed body, a
proxy in the environment — is left to git, and gives git's answer."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from certs import pki
from gitops.engine.urls import GitError
from gitops.source import advertisement
from gitops.source.git import Git
from tests.gitops.test_git import ENV, git
from tests.support.githttp import GitHttp, serve_git_http

SHA_A = "a" * 40
SHA_B = "b" * 40
ZERO = "0" * 40


def pkt(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % (len(data) + 4) + data


SERVICE = pkt("# service=git-upload-pack\n") + b"0000"
CAPS = "\0multi_ack side-band-64k symref=HEAD:refs/heads/main agent=git/2.39.5"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            SERVICE
            + pkt(f"{SHA_A} HEAD{CAPS}\n")
            + pkt(f"{SHA_A} refs/heads/main\n")
            + pkt(f"{SHA_B} refs/tags/v1\n")
            + pkt(f"{SHA_A} refs/tags/v1^{{}}\n")
            + b"0000",
            (
                {
                    "HEAD": SHA_A,
                    "refs/heads/main": SHA_A,
                    "refs/tags/v1": SHA_B,
                    "refs/tags/v1^{}": SHA_A,
                },
                "refs/heads/main",
            ),
            id="branches-peeled-tags-and-head",
        ),
        pytest.param(
            SERVICE + pkt(f"{ZERO} capabilities^{{}}\0agent=git/2\n") + b"0000",
            ({}, None),
            id="empty-repository",
        ),
        pytest.param(
            SERVICE + pkt(f"{SHA_A} refs/heads/dev\0agent=git/2\n") + b"0000",
            ({"refs/heads/dev": SHA_A}, None),
            id="no-head-no-symref",
        ),
        pytest.param(
            SERVICE + pkt(f"{SHA_A} refs/heads/dev{CAPS}\n") + b"0000",
            ({"refs/heads/dev": SHA_A}, None),
            id="symref-to-an-unadvertised-head-is-dropped",
        ),
        pytest.param(
            SERVICE + pkt(f"{'c' * 64} HEAD{CAPS} object-format=sha256\n") + b"0000",
            ({"HEAD": "c" * 64}, "refs/heads/main"),
            id="sha256-repository",
        ),
        pytest.param(b"", None, id="empty-body"),
        pytest.param(b"<html>login</html>", None, id="not-pkt-lines"),
        pytest.param(pkt(f"{SHA_A} HEAD{CAPS}\n") + b"0000", None, id="no-service-line"),
        pytest.param(
            pkt("# service=git-receive-pack\n") + b"0000" + pkt(f"{SHA_A} HEAD\n") + b"0000",
            None,
            id="another-service",
        ),
        pytest.param(SERVICE + pkt(f"{SHA_A} HEAD{CAPS}\n"), None, id="no-final-flush"),
        pytest.param(SERVICE + b"00ff" + SHA_A.encode(), None, id="truncated-line"),
        pytest.param(SERVICE + b"0003" + b"0000", None, id="length-below-four"),
        pytest.param(SERVICE + b"zzzz" + b"0000", None, id="length-not-hex"),
        pytest.param(
            SERVICE + pkt(f"{SHA_A} HEAD{CAPS}\n") + pkt(f"{SHA_A} refs/x{CAPS}\n") + b"0000",
            None,
            id="capabilities-on-a-later-line",
        ),
        pytest.param(SERVICE + pkt("not-a-sha refs/heads/main\n") + b"0000", None, id="bad-sha"),
        pytest.param(SERVICE + pkt(f"{SHA_A} refs/a b\n") + b"0000", None, id="space-in-name"),
        pytest.param(
            SERVICE + pkt(f"{SHA_A} HEAD\n") + b"0000" + pkt(f"{SHA_A} refs/x\n") + b"0000",
            None,
            id="lines-after-the-flush",
        ),
        pytest.param(
            SERVICE
            + pkt(f"{ZERO} capabilities^{{}}\0agent=git/2\n")
            + pkt(f"{SHA_A} refs/heads/main\n")
            + b"0000",
            None,
            id="capabilities-line-beside-refs",
        ),
    ],
)
def test_parse(body: bytes, expected: advertisement.Refs | None) -> None:
    assert advertisement.parse(body) == expected


@pytest.mark.parametrize(
    ("url", "env", "expected"),
    [
        ("https://git.example.com/org/repo.git", {}, True),
        ("http://127.0.0.1:8080/repo", {}, True),
        ("ssh://git@git.example.com/org/repo.git", {}, False),
        ("file:///srv/repo.git", {}, False),
        ("https://git.example.com/repo.git?x=1", {}, False),
        ("https://user@git.example.com/repo.git", {}, False),
        ("https:///repo.git", {}, False),
        ("https://git.example.com/repo.git", {"HTTPS_PROXY": "http://proxy:3128"}, False),
        ("https://git.example.com/repo.git", {"no_proxy": "example.com"}, False),
        ("https://git.example.com/repo.git", {"ALL_PROXY": "socks5://proxy"}, False),
        ("https://git.example.com/repo.git", {"GIT_SSL_CAINFO": "/etc/ca.pem"}, True),
        ("https://git.example.com/repo.git", {"GIT_SSH_COMMAND": "ssh"}, True),
    ],
)
def test_usable(
    url: str, env: dict[str, str], expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert advertisement.usable(url, env) is expected


def test_a_proxy_in_the_process_environment_leaves_it_to_git(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "https://git.example.com/repo.git"
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert advertisement.usable(url)
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    assert not advertisement.usable(url)


def _git_ls_remote(url: str) -> advertisement.Refs:
    """What git itself prints for `url`, read the way `Git.ls_remote` reads it."""
    out = subprocess.run(
        ["git", "ls-remote", "--symref", "--", url],
        env=ENV,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    refs: dict[str, str] = {}
    head = None
    for line in out.splitlines():
        left, _, name = line.partition("\t")
        if left.startswith("ref: "):
            head = left[len("ref: ") :] if name == "HEAD" else head
        elif name:
            refs[name] = left
    return refs, head


@pytest.fixture
def repos(tmp_path: Path) -> Path:
    """`origin.git` (HEAD → main; branches main and dev, an annotated and a light tag) and
    `empty.git`, bare, under one directory."""
    top = tmp_path / "repos"
    top.mkdir()
    git(top, "init", "-q", "--bare", "-b", "main", "origin.git")
    git(top, "init", "-q", "--bare", "-b", "main", "empty.git")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(top / "origin.git"), str(work))
    git(work, "checkout", "-q", "-b", "main")
    (work / "f").write_text("one\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "one")
    git(work, "tag", "-a", "v1", "-m", "release 1")
    git(work, "tag", "light")
    git(work, "branch", "dev")
    (work / "f").write_text("two\n")
    git(work, "commit", "-q", "-am", "two")
    git(work, "push", "-q", "origin", "main", "dev", "v1", "light")
    return top


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Git]:
    git_client = Git(tmp_path / "cache", timeout=30)
    try:
        yield git_client
    finally:
        await git_client.close()


async def read_refs(
    url: str, timeout: float, tls: ssl.SSLContext | None = None
) -> advertisement.Refs | None:
    """One read with a reader of its own, closed after."""
    reader = advertisement.RefReader()
    try:
        return await reader.read(url, timeout, tls)
    finally:
        await reader.close()


def _info_refs(server: GitHttp) -> list[str]:
    return [path for path, _ in server.requests]


async def test_a_remote_reads_as_git_ls_remote_reads_it_with_one_get(
    repos: Path, client: Git
) -> None:
    async with serve_git_http(repos) as server:
        url = server.url_of("origin.git")
        expected = await asyncio.to_thread(_git_ls_remote, url)
        assert set(expected[0]) >= {"HEAD", "refs/heads/dev", "refs/tags/v1^{}", "refs/tags/light"}
        assert expected[1] == "refs/heads/main"
        by_git = len(server.requests)
        assert by_git == 2, server.requests  # protocol v2: the advertisement, then ls-refs

        assert await read_refs(url, timeout=10) == expected
        assert _info_refs(server)[by_git:] == ["/origin.git/info/refs"]

        assert await client.ls_remote(url) == expected
        ref = await client.resolve(url, "v1")  # the commit an annotated tag points at
        assert (ref.ref, ref.sha) == ("refs/tags/v1", expected[0]["refs/tags/v1^{}"])
        assert _info_refs(server)[by_git + 1 :] == ["/origin.git/info/refs"] * 2


async def test_an_empty_repository_reads_as_git_reads_it(repos: Path) -> None:
    async with serve_git_http(repos) as server:
        url = server.url_of("empty.git")
        expected = await asyncio.to_thread(_git_ls_remote, url)
        assert expected == ({}, None)
        assert await read_refs(url, timeout=10) == expected


async def test_a_redirect_is_left_to_git_which_follows_it(repos: Path, client: Git) -> None:
    async with serve_git_http(
        repos, redirect=lambda p: "/origin.git/info/refs" if p.startswith("/moved") else None
    ) as server:
        url = server.url_of("moved.git")
        assert await read_refs(url, timeout=10) is None
        refs, head = await client.ls_remote(url)
        assert head == "refs/heads/main" and "refs/heads/dev" in refs
        # The in-process GET, then git's: redirected, it asks the target (GET and POST).
        assert _info_refs(server)[:2] == ["/moved.git/info/refs"] * 2
        assert "/origin.git/git-upload-pack" in _info_refs(server)


async def test_a_remote_that_wants_credentials_is_left_to_git(repos: Path, client: Git) -> None:
    async with serve_git_http(repos, username="alice", password="pw") as server:
        url = server.url_of("origin.git")
        assert await read_refs(url, timeout=10) is None
        with pytest.raises(GitError, match="authentication"):
            await client.ls_remote(url)
        # Ours first, then git's own (the 401 was not final); none carried credentials.
        assert server.requests[0] == ("/origin.git/info/refs", None)
        assert len(server.requests) >= 2, server.requests
        assert set(server.requests) == {("/origin.git/info/refs", None)}


@asynccontextmanager
async def serve(handler: web.Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/repo.git"
    finally:
        await runner.cleanup()


ADVERTISED = SERVICE + pkt(f"{SHA_A} HEAD{CAPS}\n") + pkt(f"{SHA_A} refs/heads/main\n") + b"0000"


async def test_https_is_verified_against_the_ca_git_is_told(tmp_path: Path) -> None:
    ca = pki.new_ca("git-host-ca")
    pki.write_bundle(tmp_path, ca, pki.new_serving_cert(ca, ["127.0.0.1"]))
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp_path / pki.CERT_FILE, tmp_path / pki.KEY_FILE)
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    asked = 0

    async def answer(request: web.Request) -> web.StreamResponse:
        nonlocal asked
        asked += 1
        return web.Response(body=ADVERTISED, content_type=advertisement.CONTENT_TYPE)

    async with serve(answer, served) as url:
        trusted = advertisement.tls_for({"GIT_SSL_CAINFO": str(tmp_path / "ca.pem")})
        refs = await read_refs(url, timeout=10, tls=trusted)
        assert refs == ({"HEAD": SHA_A, "refs/heads/main": SHA_A}, "refs/heads/main")
        # Not a CA git trusts: left to git, which refuses the certificate in its words.
        system = ssl.create_default_context()
        assert await read_refs(url, timeout=10, tls=system) is None
        assert asked == 1  # the handshake failed before any request
        untrusting = Git(tmp_path / "cache", timeout=10, env={"GIT_SSL_CAINFO": ""})
        try:
            with pytest.raises(GitError, match=r"certificate|SSL|TLS"):
                await untrusting.ls_remote(url)
        finally:
            await untrusting.close()


def _advertisement_of(size: int) -> bytes:
    """A well-formed advertisement of at least `size` bytes: parsed, were it not too big."""
    line = pkt(f"{SHA_A} refs/heads/branch-{'x' * 40}-0000000\n")
    refs = [pkt(f"{SHA_A} HEAD{CAPS}\n")]
    refs += [line.replace(b"0000000", b"%07d" % i) for i in range(size // len(line) + 1)]
    return SERVICE + b"".join(refs) + b"0000"


OVERSIZED = _advertisement_of(advertisement.MAX_BODY + 1)


def test_the_oversized_answer_would_parse() -> None:
    """What makes the oversized cases below fail if the cap is gone."""
    parsed = advertisement.parse(OVERSIZED)
    assert len(OVERSIZED) > advertisement.MAX_BODY
    assert parsed is not None and len(parsed[0]) > 70_000


@pytest.mark.parametrize(
    ("content_type", "body", "sized"),
    [
        ("text/plain", ADVERTISED, True),  # a dumb server's file, as it serves it
        (advertisement.CONTENT_TYPE, SERVICE + pkt(f"{SHA_A} HEAD{CAPS}\n"), True),  # no flush
        (advertisement.CONTENT_TYPE, OVERSIZED, True),  # refused by its Content-Length
        (advertisement.CONTENT_TYPE, OVERSIZED, False),  # chunked: refused while read
    ],
    ids=["dumb-http", "malformed", "oversized", "oversized-chunked"],
)
async def test_an_answer_git_may_read_otherwise_is_left_to_git(
    content_type: str, body: bytes, sized: bool
) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        if sized:
            return web.Response(body=body, headers={"Content-Type": content_type})
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        for start in range(0, len(body), 1 << 20):
            await response.write(body[start : start + (1 << 20)])
        await response.write_eof()
        return response

    async with serve(answer) as url:
        assert await read_refs(url, timeout=10) is None


async def test_no_cookie_a_server_sets_is_sent_again() -> None:
    """A tenant's server must not plant what another tenant's read of a shared host carries."""
    cookies: list[str | None] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        cookies.append(request.headers.get("Cookie"))
        response = web.Response(body=ADVERTISED, content_type=advertisement.CONTENT_TYPE)
        response.set_cookie("session", "planted")
        return response

    reader = advertisement.RefReader()
    try:
        async with serve(answer) as url:
            url = url.replace("127.0.0.1", "localhost")  # a name: a cookie jar refuses an IP
            for _ in range(3):
                assert await reader.read(url, timeout=10) is not None
    finally:
        await reader.close()
    assert cookies == [None, None, None]


async def test_a_server_that_never_answers_fails_once_at_the_bound() -> None:
    released = asyncio.Event()
    asked = 0

    async def hang(request: web.Request) -> web.StreamResponse:
        nonlocal asked
        asked += 1
        await released.wait()
        return web.Response(status=500)

    async with serve(hang) as url:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            with pytest.raises(GitError, match=r"^timed out after 0.5 s trying to list refs of "):
                await read_refs(url, timeout=0.5)
            assert loop.time() - started < 5
        finally:
            released.set()
    assert asked == 1  # not asked again by git: it would wait as long


async def test_a_refused_connection_gives_gits_own_message(client: Git) -> None:
    with pytest.raises(GitError, match=r"cannot reach http://127\.0\.0\.1:9/repo\.git"):
        await client.ls_remote("http://127.0.0.1:9/repo.git")
