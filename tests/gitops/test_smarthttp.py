"""`ls-remote` of an anonymous HTTP(S) remote in process: the same refs and HEAD as git lists,
against `git http-backend` on loopback, in one request and no git process; everything it cannot
answer exactly (credentials, proxies, redirects, errors, dumb servers) is left to git."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.source import smarthttp
from gitops.source.git import Git
from tests.gitops.test_git import git
from tests.support.githttp import serve_git_http

ZERO = "0" * 40
A, B = "a" * 40, "b" * 40


def pkt(text: bytes) -> bytes:
    return b"%04x" % (len(text) + 4) + text


def advertisement(*lines: bytes, service: bool = True) -> bytes:
    head = pkt(b"# service=git-upload-pack\n") + b"0000" if service else b""
    return head + b"".join(pkt(line) for line in lines) + b"0000"


PARSED = [
    (
        "a branch, HEAD on it, an annotated tag peeled",
        advertisement(
            A.encode() + b" HEAD\0multi_ack symref=HEAD:refs/heads/main agent=git/2\n",
            A.encode() + b" refs/heads/main\n",
            B.encode() + b" refs/tags/v1\n",
            A.encode() + b" refs/tags/v1^{}\n",
        ),
        {"HEAD": A, "refs/heads/main": A, "refs/tags/v1": B, "refs/tags/v1^{}": A},
        "refs/heads/main",
    ),
    (
        "an empty repository",
        advertisement(ZERO.encode() + b" capabilities^{}\0multi_ack agent=git/2\n"),
        {},
        None,
    ),
    (
        "a detached HEAD (no symref)",
        advertisement(A.encode() + b" HEAD\0multi_ack\n", B.encode() + b" refs/heads/x\n"),
        {"HEAD": A, "refs/heads/x": B},
        None,
    ),
]


@pytest.mark.parametrize(
    ("body", "refs", "head"), [c[1:] for c in PARSED], ids=[c[0] for c in PARSED]
)
def test_an_advertisement_lists_what_ls_remote_symref_lists(
    body: bytes, refs: dict[str, str], head: str | None
) -> None:
    assert smarthttp.parse_advertisement(body) == (refs, head)


NOT_ADVERTISEMENTS = [
    ("an HTML error page", b"<html>Not Found</html>"),
    ("no service line (a dumb server's info/refs)", A.encode() + b"\trefs/heads/main\n"),
    ("cut short", advertisement(A.encode() + b" HEAD\0\n")[:-6]),
    ("a line without a sha", advertisement(b"nonsense HEAD\0\n")),
    ("a length past the end", pkt(b"# service=git-upload-pack\n") + b"0000ffffabc"),
    (
        "a flush inside the refs",
        advertisement(A.encode() + b" HEAD\0\n", service=True)[:-4]
        + b"0000"
        + pkt(A.encode() + b" refs/heads/x\n")
        + b"0000",
    ),
]


@pytest.mark.parametrize(
    "body", [c[1] for c in NOT_ADVERTISEMENTS], ids=[c[0] for c in NOT_ADVERTISEMENTS]
)
def test_anything_else_is_not_an_advertisement(body: bytes) -> None:
    with pytest.raises(smarthttp.NotAdvertisement):
        smarthttp.parse_advertisement(body)


FALLS_BACK = [
    ("anonymous https", "https://example.com/r.git", False, {}, None, False),
    ("anonymous http", "http://127.0.0.1:8080/r.git", False, {}, None, False),
    ("credentials", "https://example.com/r.git", True, {}, None, True),
    ("ssh", "ssh://git@example.com/r.git", False, {}, None, True),
    ("a local path", "file:///srv/r.git", False, {}, None, True),
    ("the client's own environment", "https://example.com/r.git", False, {"X": "1"}, None, True),
    ("a proxy", "https://example.com/r.git", False, {}, "https_proxy", True),
    ("git's CA file", "https://example.com/r.git", False, {}, "GIT_SSL_CAINFO", True),
]


@pytest.mark.parametrize(
    ("url", "creds", "extra", "variable", "expected"),
    [c[1:] for c in FALLS_BACK],
    ids=[c[0] for c in FALLS_BACK],
)
def test_git_answers_whatever_the_request_in_process_might_answer_differently(
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    creds: bool,
    extra: dict[str, str],
    variable: str | None,
    expected: bool,
) -> None:
    for name in smarthttp._ENV:
        monkeypatch.delenv(name, raising=False)
    if variable is not None:
        monkeypatch.setenv(variable, "http://127.0.0.1:3128")
    assert smarthttp.falls_back(url, creds, extra) is expected


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """r.git: branches main (HEAD) and dev, a lightweight and an annotated tag."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "f").write_text("x\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "one")
    git(work, "branch", "dev")
    (work / "f").write_text("y\n")
    git(work, "commit", "-q", "-am", "two")
    git(work, "tag", "light")
    git(work, "tag", "-a", "-m", "annotated", "v1", "HEAD~1")
    top = tmp_path / "repos"
    top.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(top / "r.git"))
    return top


async def test_the_refs_read_in_process_are_those_git_lists_in_one_request(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in smarthttp._ENV:
        monkeypatch.delenv(name, raising=False)
    async with serve_git_http(root) as server:
        url = server.url_of("r.git")
        by_git = await Git(tmp_path / "a", env={"GIT_TRACE": "0"}).ls_remote(url)  # falls back
        git_requests = len(server.requests)
        in_process = await Git(tmp_path / "b").ls_remote(url)
        assert len(server.requests) - git_requests == 1  # git v2 needs two: GET, POST ls-refs
        assert server.requests[-1][0] == "/r.git/info/refs"

    assert in_process == by_git
    refs, head = in_process
    assert head == "refs/heads/main"
    assert {"HEAD", "refs/heads/main", "refs/heads/dev", "refs/tags/light"} <= refs.keys()
    assert refs["refs/tags/v1^{}"] == refs["refs/heads/dev"] != refs["refs/tags/v1"]


async def test_a_remote_that_is_not_there_is_left_to_git_and_its_message(
    root: Path, tmp_path: Path
) -> None:
    async with serve_git_http(root) as server:
        assert await smarthttp.ls_remote(server.url_of("missing.git"), 10) is None
    assert await smarthttp.ls_remote(server.url_of("r.git"), 10) is None  # nobody listening
