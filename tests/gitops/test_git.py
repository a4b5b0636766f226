"""gitops.source.git against real repositories made with the git CLI in temporary directories."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitops.engine.urls import (
    Credentials,
    GitError,
    normalize_repo_url,
    validate_revision,
    validate_url,
)
from gitops.source import process as gitproc
from gitops.source.git import Git

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repository (HEAD → main) with two commits and a tag, and a work clone."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(bare), str(work))
    git(work, "checkout", "-q", "-b", "main")
    (work / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "first\n\nthe body")
    git(work, "tag", "-a", "v1", "-m", "release 1")
    (work / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n")
    git(work, "commit", "-q", "-am", "second")
    git(work, "branch", "dev", "HEAD~1")
    git(work, "push", "-q", "origin", "main", "dev", "v1")
    return bare, work


async def test_the_remote_head_branch_tag_and_sha_resolve_and_check_out(
    remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    client = Git(tmp_path / "cache", timeout=20)
    head = git(work, "rev-parse", "main")
    first = git(work, "rev-parse", "v1^{commit}")
    ref, commit = await client.fetch(str(bare), None)
    assert (ref.ref, ref.sha, commit.subject, commit.author_name) == (
        "refs/heads/main",
        head,
        "second",
        "Ada",
    )
    assert (await client.fetch(str(bare), "dev"))[0].sha == first
    ref, commit = await client.fetch(f"file://{bare}", "v1")
    assert (ref.ref, ref.sha, commit.message) == ("refs/tags/v1", first, "first\n\nthe body")
    assert (await client.fetch(str(bare), first))[0].sha == first
    assert (await client.fetch(str(bare), first[:8]))[0].sha == first
    out = await client.checkout(str(bare), "v1", tmp_path / "co")
    assert (out.root / "cm.yaml").read_text().endswith("{name: one}\n")
    assert out.commit.author_email == "ada@example.com" and out.commit.committer_date[:2] == "20"
    assert len(list((tmp_path / "cache").glob("*.git"))) == 1


async def test_a_moved_branch_is_fetched_anew(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, work = remote
    client = Git(tmp_path / "cache", timeout=20)
    before, _ = await client.fetch(str(bare), "main")
    (work / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: three}\n")
    git(work, "commit", "-q", "-am", "third")
    git(work, "push", "-q", "origin", "main")
    after, commit = await client.fetch(str(bare), "main")
    assert after.sha != before.sha and commit.subject == "third"


@pytest.mark.parametrize("revision", ["nope", "0123456789abcdef0123456789abcdef01234567"])
async def test_a_missing_revision_is_revision_not_found(
    remote: tuple[Path, Path], tmp_path: Path, revision: str
) -> None:
    with pytest.raises(GitError, match="revision not found"):
        await Git(tmp_path / "cache", timeout=20).fetch(str(remote[0]), revision)


async def test_an_unreachable_repository_is_repository_not_found(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="repository not found"):
        await Git(tmp_path / "cache", timeout=20).fetch(str(tmp_path / "missing.git"), None)


async def test_hostile_refs_and_urls_are_refused_and_nothing_runs(
    remote: tuple[Path, Path], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    client = Git(tmp_path / "cache", timeout=20)
    with pytest.raises(GitError, match="invalid revision"):
        await client.fetch(str(remote[0]), f"--upload-pack=touch {marker}")
    with pytest.raises(GitError, match="starts with '-'"):
        await client.fetch(f"-oProxyCommand=touch {marker}", None)
    with pytest.raises(GitError, match="unsupported"):
        await client.fetch(f"ext::touch%S{marker}", None)
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client to reach the remote with")
async def test_an_unreachable_ssh_remote_says_why_not_gits_advice(tmp_path: Path) -> None:
    client = Git(tmp_path / "cache", timeout=20)
    with pytest.raises(GitError) as info:
        await client.fetch("ssh://git@127.0.0.1:1/org/repo.git", None)
    message = str(info.value)
    assert message.startswith("cannot reach ssh://git@127.0.0.1:1/org/repo.git: ssh: connect to")
    assert message.endswith("Connection refused"), message


async def test_a_token_in_the_url_never_appears_in_an_error(tmp_path: Path) -> None:
    client = Git(tmp_path / "cache", timeout=20)
    with pytest.raises(GitError) as info:
        await client.fetch("https://user:tok3n-SECRET@127.0.0.1:9/org/repo.git", None)
    assert "tok3n-SECRET" not in str(info.value) and "user:" not in str(info.value)
    assert "127.0.0.1:9/org/repo.git" in str(info.value)


async def test_a_hung_git_is_killed_after_the_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "ssh-started"
    script = tmp_path / "slow-ssh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 60\n")
    script.chmod(0o755)
    client = Git(tmp_path / "cache", timeout=1.5, env={"GIT_SSH_COMMAND": str(script)})
    with pytest.raises(GitError, match=r"timed out after 1.5 s"):
        await client.fetch("ssh://git@example.invalid/org/repo.git", None)
    assert marker.exists()
    # the whole process group is gone: no `sleep 60` left behind
    leftover = subprocess.run(["pgrep", "-f", f"exec sleep 60|{script}"], capture_output=True)
    assert leftover.returncode != 0 or not leftover.stdout.strip()


async def test_ssh_keys_go_through_a_private_file_never_the_command_line(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    script = tmp_path / "fake-ssh"
    script.write_text(f'#!/bin/sh\necho "$GIT_SSH_COMMAND" > {seen}\nexit 1\n')
    script.chmod(0o755)
    env = gitproc.environment(
        tmp_path,
        "ssh://h/r",
        Credentials(ssh_private_key="-----KEY-----"),
        extra_env={},
        known_hosts=tmp_path / "cache" / "known_hosts",
    )
    assert "KEY" not in env["GIT_SSH_COMMAND"] and "IdentitiesOnly=yes" in env["GIT_SSH_COMMAND"]
    key = Path(env["GIT_SSH_COMMAND"].split("-i ")[1].split()[0].strip("'"))
    assert oct(key.stat().st_mode & 0o777) == "0o600"


URLS = {
    "https upper-case host and .git": (
        "HTTPS://GitHub.com/Org/Repo.git/",
        "https://github.com/Org/Repo",
    ),
    "userinfo and default port dropped": ("https://u:p@host:443/a/b.git", "https://host/a/b"),
    "other ports kept": ("http://host:8080/a/b", "http://host:8080/a/b"),
    "scp-like becomes ssh": ("git@github.com:org/repo.git", "ssh://github.com/org/repo"),
    "ssh with user and port 22": ("ssh://git@Host:22/org/repo.git", "ssh://host/org/repo"),
    "a local path becomes file": ("/srv/repos/x.git", "file:///srv/repos/x"),
}


@pytest.mark.parametrize(("url", "expected"), URLS.values(), ids=URLS.keys())
def test_normalize_repo_url(url: str, expected: str) -> None:
    assert normalize_repo_url(url) == expected


REVISIONS = {"": "HEAD", "main": "main", "release/1.0": "release/1.0", "ABCDEF1": "abcdef1"}


@pytest.mark.parametrize(("revision", "expected"), REVISIONS.items(), ids=REVISIONS.keys())
def test_valid_revisions(revision: str, expected: str) -> None:
    assert validate_revision(revision) == expected


@pytest.mark.parametrize(
    "revision", ["-x", "a..b", "a b", "x.lock", "a~1", "refs/heads/", "@{-1}", ".hidden"]
)
def test_invalid_revisions(revision: str) -> None:
    with pytest.raises(GitError):
        validate_revision(revision)


def test_urls_lose_their_userinfo_and_local_paths_become_file_urls(tmp_path: Path) -> None:
    assert validate_url("https://x:y@h/r.git") == "https://h/r.git"
    assert validate_url(str(tmp_path)) == tmp_path.as_uri()
    assert validate_url("git@h:o/r.git") == "git@h:o/r.git"
    with pytest.raises(GitError):
        validate_url("ftp://h/r")
