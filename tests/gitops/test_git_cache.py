"""The git cache on a large or unlucky repository: checkout by the fetched sha (a push in
between changes nothing), only `path` written, stale lock files removed, refs of old commits
dropped, a dumb-HTTP remote fetched whole. Real git, real repositories in temporary
directories; the dumb-HTTP remote is a static file server on loopback."""

from __future__ import annotations

import functools
import http.server
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops.engine.urls import GitError
from gitops.source import tree as gittree
from gitops.source.git import Git
from tests.gitops.conftest import GIT_ENV, Remote

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{v: '{v}'}}\n"


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


async def test_export_writes_the_fetched_commit_even_after_the_branch_moved(
    tmp_path: Path,
) -> None:
    remote = Remote(tmp_path / "remote")
    a = remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    client = Git(tmp_path / "cache", timeout=20)
    ref, commit = await client.fetch(remote.url, "main")
    assert commit.sha == a and ref.ref == "refs/heads/main"
    b = remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})  # the race: a push
    root = await client.export(remote.url, commit.sha, tmp_path / "co")
    assert "v: 'A'" in (root / "cm.yaml").read_text() and b != a


async def test_export_refuses_a_commit_not_in_the_cache(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    b = remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})
    client = Git(tmp_path / "cache", timeout=20)
    await client.fetch(remote.url, None)
    with pytest.raises(GitError, match="not in the cache"):
        await client.export(remote.url, "f" * 40, tmp_path / "co")
    with pytest.raises(GitError, match="not a full commit sha"):
        await client.export(remote.url, b[:8], tmp_path / "co2")


async def test_only_the_files_under_path_are_written(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit(
        "tree",
        {
            "jobs/a.yaml": CM.format(name="a", v="1"),
            "jobs/deep/b.yaml": CM.format(name="b", v="2"),
            "jobsx/c.yaml": CM.format(name="c", v="3"),
            "other/d.yaml": CM.format(name="d", v="4"),
            "README.md": "hello\n",
        },
    )
    client = Git(tmp_path / "cache", timeout=20)
    out = await client.checkout(remote.url, None, tmp_path / "sparse", path="jobs")
    assert files_under(out.root) == {"jobs/a.yaml", "jobs/deep/b.yaml"}
    whole = await client.checkout(remote.url, None, tmp_path / "whole", path=".")
    assert len(files_under(whole.root)) == 5


async def test_a_symlink_under_path_checks_out_the_whole_tree(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit("shared", {"shared/cm.yaml": CM.format(name="s", v="1")})
    os.makedirs(remote.work / "jobs", exist_ok=True)
    os.symlink("../shared/cm.yaml", remote.work / "jobs" / "cm.yaml")
    remote.commit("link", {})
    client = Git(tmp_path / "cache", timeout=20)
    out = await client.checkout(remote.url, None, tmp_path / "co", path="jobs")
    assert (out.root / "jobs" / "cm.yaml").read_text() == CM.format(name="s", v="1")


async def test_a_stale_shallow_lock_is_removed_before_the_next_fetch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    client = Git(tmp_path / "cache", timeout=5)
    await client.fetch(remote.url, None)
    lock = client.clone_dir(remote.url) / "shallow.lock"
    lock.write_text("")  # what a git killed in the middle of a shallow fetch leaves
    old = time.time() - 60
    os.utime(lock, (old, old))
    b = remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})
    with caplog.at_level(logging.WARNING, logger="trainops.gitops"):
        _, commit = await client.fetch(remote.url, None)
    assert commit.sha == b and not lock.exists()
    assert any("shallow.lock" in r.getMessage() for r in caplog.records)


async def test_a_fresh_lock_of_someone_else_is_left_alone(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    client = Git(tmp_path / "cache", timeout=30)
    await client.fetch(remote.url, None)
    lock = client.clone_dir(remote.url) / "shallow.lock"
    lock.write_text("")
    remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})
    with pytest.raises(GitError, match=r"lock file shallow\.lock exists"):
        await client.fetch(remote.url, None)
    assert lock.exists()


async def test_the_cache_keeps_refs_of_the_newest_commits_only(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    client = Git(tmp_path / "cache", timeout=20)
    shas = []
    for i in range(gittree.KEEP_COMMITS + 4):
        shas.append(remote.commit(f"c{i}", {"cm.yaml": CM.format(name="x", v=i)}))
        await client.fetch(remote.url, None)
    out = Remote.git(client.clone_dir(remote.url), "for-each-ref", "--format=%(refname)")
    kept = {line.rsplit("/", 1)[1] for line in out.splitlines()} & set(shas)
    assert shas[-1] in kept and len(kept) == gittree.KEEP_COMMITS


@pytest.fixture
def dumb_http(tmp_path: Path) -> Iterator[tuple[Remote, str]]:
    """A remote served as static files (git's dumb HTTP protocol) on loopback."""
    remote = Remote(tmp_path / "remote")
    handler = functools.partial(_QuietHandler, directory=str(remote.bare.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield remote, f"http://127.0.0.1:{server.server_address[1]}/{remote.bare.name}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_a_dumb_http_remote_is_fetched_whole_when_shallow_is_refused(
    dumb_http: tuple[Remote, str], tmp_path: Path
) -> None:
    remote, url = dumb_http
    a = remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    Remote.git(remote.bare, "update-server-info")
    client = Git(tmp_path / "cache", timeout=20)
    try:
        ref, commit = await client.fetch(url, "main")
        assert commit.sha == a and ref.ref == "refs/heads/main"
        b = remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})
        Remote.git(remote.bare, "update-server-info")
        out = await client.checkout(url, None, tmp_path / "co")
        assert out.commit.sha == b and "v: 'B'" in (out.root / "cm.yaml").read_text()
    finally:
        await client.close()  # its in-process ref reads' session (left to git here: dumb HTTP)


# --- the pure decisions ------------------------------------------------------------------------

FILE, LINK, SUB = "100644", gittree.SYMLINK_MODE, "160000"
TREE = [
    (FILE, "README.md"),
    (FILE, "jobs/a.yaml"),
    (FILE, "jobs/deep/b.yaml"),
    (FILE, "jobsx/c.yaml"),
    (SUB, "jobs/vendored"),
]


@pytest.mark.parametrize(
    ("entries", "path", "expected"),
    [
        pytest.param(TREE, ".", None, id="root-is-everything"),
        pytest.param(TREE, "", None, id="empty-is-root"),
        pytest.param(TREE, "./", None, id="dot-slash-is-root"),
        pytest.param(TREE, "jobs", ["jobs/a.yaml", "jobs/deep/b.yaml"], id="a-directory"),
        pytest.param(TREE, "./jobs/", ["jobs/a.yaml", "jobs/deep/b.yaml"], id="normalised"),
        pytest.param(TREE, "jobs/a.yaml", ["jobs/a.yaml"], id="a-file"),
        pytest.param(TREE, "nope", [], id="missing-writes-nothing"),
        pytest.param(TREE, "../x", None, id="dotdot-is-judged-on-the-whole-tree"),
        pytest.param(TREE, "/etc", None, id="absolute-is-judged-on-the-whole-tree"),
        pytest.param([*TREE, (LINK, "jobs/l.yaml")], "jobs", None, id="link-under-path"),
        pytest.param([*TREE, (LINK, "jobs")], "jobs/x", None, id="link-on-the-way"),
        pytest.param(
            [*TREE, (LINK, "jobsx/l")], "jobs", ["jobs/a.yaml", "jobs/deep/b.yaml"], id="link-away"
        ),
    ],
)
def test_sparse_selection(
    entries: list[tuple[str, str]], path: str, expected: list[str] | None
) -> None:
    assert gittree.sparse_selection(entries, path) == expected


def test_parse_ls_files() -> None:
    out = "100644 " + "a" * 40 + " 0\tjobs/a b.yaml\x00120000 " + "b" * 40 + " 0\tl\x00"
    assert gittree.parse_ls_files(out) == [(FILE, "jobs/a b.yaml"), (LINK, "l")]


@pytest.mark.parametrize(
    ("killed", "expected"),
    [(False, ["old.lock"]), (True, ["fresh.lock", "old.lock"])],
)
def test_stale_locks(killed: bool, expected: list[str]) -> None:
    locks = [("fresh.lock", 995.0), ("old.lock", 900.0)]
    assert gittree.stale_locks(locks, now=1000.0, max_age=60, killed=killed) == expected


def test_refs_to_drop_keeps_the_newest_and_the_ones_in_use() -> None:
    refs = [(f"refs/trainops/{i:040x}", i) for i in range(12)]
    refs += [("refs/trainops/heads/main", 0), ("refs/trainops/fetching", 0)]
    drop = gittree.refs_to_drop(refs, keep=[f"{1:040x}"], limit=8)
    # The one in use (1) and the 7 newest (5-11): 8 in all, whatever the times say.
    assert drop == sorted(f"refs/trainops/{i:040x}" for i in (0, 2, 3, 4))
    tied = [(f"refs/trainops/{i:040x}", 100) for i in range(12)]  # one second, twelve commits
    assert len(gittree.refs_to_drop(tied, keep=[f"{11:040x}"], limit=8)) == 4


async def test_the_least_recently_used_clone_goes_when_the_cache_is_over_its_cap(
    tmp_path: Path,
) -> None:
    one, two = Remote(tmp_path / "one"), Remote(tmp_path / "two")
    one.commit("a", {"cm.yaml": CM.format(name="x", v="1")})
    two.commit("a", {"cm.yaml": CM.format(name="y", v="2")})
    client = Git(tmp_path / "cache", timeout=20, max_cache_bytes=1)  # any two clones exceed it
    await client.fetch(one.url, None)
    assert client.clone_dir(one.url).is_dir()
    await client.fetch(two.url, None)  # one is older and not in use: it goes
    assert client.clone_dir(two.url).is_dir() and not client.clone_dir(one.url).exists()
    _, commit = await client.fetch(one.url, None)  # and comes back at its next fetch
    assert commit.subject == "a" and not client.clone_dir(two.url).exists()


@pytest.mark.parametrize(
    ("cap", "keep", "expected"),
    [
        (100, [], []),
        (60, [], ["old"]),
        (60, ["old"], ["mid"]),
        (10, [], ["old", "mid", "new"]),
        (10, ["new"], ["old", "mid"]),
    ],
)
def test_clones_to_evict(cap: int, keep: list[str], expected: list[str]) -> None:
    clones = [("new", 30, 3.0), ("old", 30, 1.0), ("mid", 30, 2.0)]
    assert gittree.clones_to_evict(clones, cap=cap, keep=keep) == expected


def logging_git(tmp_path: Path) -> tuple[str, Path]:
    """A `git` that appends its subcommand to a log, then runs the real git."""
    log, script = tmp_path / "git.log", tmp_path / "git-logged"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -c|--git-dir) skip=1; continue;; esac;'
        ' if [ -n "$skip" ]; then skip=; continue; fi;'
        f' case "$a" in -*) ;; *) echo "$a" >> {log}; break;; esac; done\n'
        'exec git "$@"\n'
    )
    script.chmod(0o755)
    return str(script), log


def commands(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def test_a_branch_that_did_not_move_costs_one_ls_remote(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "remote")
    a = remote.commit("a", {"cm.yaml": CM.format(name="x", v="A")})
    git, log = logging_git(tmp_path)
    client = Git(tmp_path / "cache", timeout=20, git=git)
    await client.fetch(remote.url, None)
    log.unlink()
    for _ in range(3):
        _, commit = await client.fetch(remote.url, None)
        assert commit.sha == a and commit.subject == "a"
    assert commands(log) == ["ls-remote"] * 3
    # The commit is still there to export (kept by its ref).
    root = await client.export(remote.url, a, tmp_path / "co")
    assert "v: 'A'" in (root / "cm.yaml").read_text()

    # A restart (a new client on the same cache): the commit is read once, then known.
    log.unlink()
    again = Git(tmp_path / "cache", timeout=20, git=git)
    await again.fetch(remote.url, None)
    assert "fetch" not in commands(log) and "update-ref" in commands(log)
    log.unlink()
    await again.fetch(remote.url, None)
    assert commands(log) == ["ls-remote"]

    # A push: fetched, and the new commit is then known too.
    b = remote.commit("b", {"cm.yaml": CM.format(name="x", v="B")})
    _, commit = await again.fetch(remote.url, None)
    assert commit.sha == b and "fetch" in commands(log)
    log.unlink()
    await again.fetch(remote.url, None)
    assert commands(log) == ["ls-remote"]


async def test_a_commit_whose_ref_was_dropped_is_read_again_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = Remote(tmp_path / "remote")
    # One second apart: the cache drops the oldest by committer time (ties in the same second
    # would leave which one goes to the shas' order).
    monkeypatch.setitem(GIT_ENV, "GIT_COMMITTER_DATE", "1700000000 +0000")
    first = remote.commit("c0", {"cm.yaml": CM.format(name="x", v="0")})
    git, log = logging_git(tmp_path)
    client = Git(tmp_path / "cache", timeout=20, git=git)
    await client.fetch(remote.url, first)
    for i in range(1, gittree.KEEP_COMMITS + 2):  # more commits than the cache keeps
        monkeypatch.setitem(GIT_ENV, "GIT_COMMITTER_DATE", f"{1700000000 + i} +0000")
        await client.fetch(
            remote.url, remote.commit(f"c{i}", {"cm.yaml": CM.format(name="x", v=i)})
        )
    log.unlink()
    _, commit = await client.fetch(remote.url, first)
    assert commit.sha == first
    assert commands(log) != ["ls-remote"]  # not answered from memory: its ref is gone
