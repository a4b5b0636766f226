"""Where bound credentials may go, as git asks for them (`credential.useHttpPath`: protocol,
host[:port], decoded path): one table for the pure rule (`urls.Binding.covers`) and the very
credential helper script git runs (`gitops.source.process.HELPER`), which must agree."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from gitops.engine.urls import Credentials, GitError, binding_of
from gitops.source import process as gitproc

B = "http://127.0.0.1:18081/team-a"
CASES = {
    "the repository": (B, "http", "127.0.0.1:18081", "team-a/x.git", True),
    "the prefix itself": (B, "http", "127.0.0.1:18081", "team-a", True),
    "deeper": (B, "http", "127.0.0.1:18081", "team-a/sub/x.git", True),
    "slashes at the ends": (B, "http", "127.0.0.1:18081", "/team-a/x.git/", True),
    "host in upper case": (B, "http", "LOCALHOST:18081", "team-a/x.git", False),
    "another host": (B, "http", "127.0.0.2:18081", "team-a/x.git", False),
    "another port": (B, "http", "127.0.0.1:18082", "team-a/x.git", False),
    "no port": (B, "http", "127.0.0.1", "team-a/x.git", False),
    "https is not http": (B, "https", "127.0.0.1:18081", "team-a/x.git", False),
    "another path": (B, "http", "127.0.0.1:18081", "team-b/x.git", False),
    "a longer name": (B, "http", "127.0.0.1:18081", "team-ab/x.git", False),
    "dot-dot out": (B, "http", "127.0.0.1:18081", "team-a/../team-b/x.git", False),
    "dot-dot staying in": (B, "http", "127.0.0.1:18081", "team-a/b/../x.git", False),
    "a dot segment": (B, "http", "127.0.0.1:18081", "team-a/./x.git", False),
    "still encoded (twice-encoded)": (B, "http", "127.0.0.1:18081", "team-a/%2e%2e/b", False),
    "a backslash": (B, "http", "127.0.0.1:18081", "team-a/..\\team-b", False),
    "a ;parameter": (B, "http", "127.0.0.1:18081", "team-a/..;/team-b", False),
    "no path (useHttpPath off)": (B, "http", "127.0.0.1:18081", "", False),
    "default port, written": ("https://h.example/a", "https", "h.example:443", "a/x", True),
    "default port, implied": ("https://h.example:443/a", "https", "h.example", "a/x", True),
    "a .git prefix": ("https://h.example/a/x.git", "https", "h.example", "a/x.git", True),
    "the prefix without .git": ("https://h.example/a/x.git", "https", "h.example", "a/x", True),
    "a whole host": ("https://h.example/", "https", "h.example", "any/x.git", True),
    "a whole host, not another": ("https://h.example/", "https", "h.example.evil", "x", False),
    "ipv6": ("http://[::1]:8080/a", "http", "[::1]:8080", "a/x", True),
}


@pytest.mark.parametrize(
    ("prefix", "protocol", "host", "path", "expected"), CASES.values(), ids=CASES
)
def test_the_binding_covers(
    prefix: str, protocol: str, host: str, path: str, expected: bool
) -> None:
    binding = binding_of(prefix)
    assert binding.covers(protocol, host, path) is expected


@pytest.mark.parametrize(
    ("prefix", "protocol", "host", "path", "expected"), CASES.values(), ids=CASES
)
def test_the_helper_git_runs_answers_the_same(
    tmp_path: Path, prefix: str, protocol: str, host: str, path: str, expected: bool
) -> None:
    helper = tmp_path / "helper.sh"
    helper.write_text(gitproc.HELPER)
    binding = binding_of(prefix)
    env = {
        "PATH": "/usr/bin:/bin",
        "TRAINOPS_GIT_USERNAME": "alice",
        "TRAINOPS_GIT_PASSWORD": "SUPERSECRET-PW",
        "TRAINOPS_GIT_PROTOCOL": binding.protocol,
        "TRAINOPS_GIT_HOST": binding.hosts[0],
        "TRAINOPS_GIT_HOST_PORT": binding.hosts[-1],
        "TRAINOPS_GIT_PATH": binding.path,
    }
    asked = f"protocol={protocol}\nhost={host}\n" + (f"path={path}\n" if path else "") + "\n"
    out = subprocess.run(
        ["sh", str(helper), "get"], input=asked, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out == ("username=alice\npassword=SUPERSECRET-PW\n" if expected else "")


def test_the_helper_answers_nothing_but_get(tmp_path: Path) -> None:
    helper = tmp_path / "helper.sh"
    helper.write_text(gitproc.HELPER)
    env = {"PATH": "/usr/bin:/bin", "TRAINOPS_GIT_PROTOCOL": "http", "TRAINOPS_GIT_PASSWORD": "p"}
    for verb in ("store", "erase"):
        out = subprocess.run(
            ["sh", str(helper), verb], input=b"protocol=http\n\n", env=env, capture_output=True
        ).stdout
        assert out == b""


@pytest.mark.parametrize(
    "prefix", ["http://h/a/../b", "http://h/a/%2e%2e/b", "http://h/a%2fb", "file:///srv/x", "x"]
)
def test_no_binding_to_an_ambiguous_or_hostless_prefix(prefix: str) -> None:
    with pytest.raises(GitError, match="not bound"):
        binding_of(prefix)


def test_an_ssh_key_is_pinned_by_the_secrets_known_hosts_and_never_offered_over_http(
    tmp_path: Path,
) -> None:
    for sub in ("u", "h", "o"):
        (tmp_path / sub).mkdir()
    creds = Credentials(ssh_private_key="KEY", known_hosts="h.example ssh-ed25519 AAAA")
    env = gitproc.environment(
        tmp_path, "ssh://git@h.example/a/x.git", creds, extra_env={}, known_hosts=tmp_path / "k"
    )
    command = env["GIT_SSH_COMMAND"]
    assert "-F /dev/null" in command
    assert "StrictHostKeyChecking=yes" in command
    assert f"UserKnownHostsFile='{tmp_path / 'known_hosts'}'" in command
    assert (tmp_path / "known_hosts").read_text() == "h.example ssh-ed25519 AAAA\n"
    unpinned = gitproc.environment(
        tmp_path / "u",
        "git@h.example:a/x.git",
        Credentials(ssh_private_key="KEY"),
        extra_env={},
        known_hosts=tmp_path / "k",
    )
    assert "StrictHostKeyChecking=accept-new" in unpinned["GIT_SSH_COMMAND"]
    http = Credentials(ssh_private_key="KEY", bound_to="http://h.example/a")
    plain = gitproc.environment(
        tmp_path / "h", "http://h.example/a/x.git", http, extra_env={}, known_hosts=tmp_path / "k"
    )
    assert "GIT_SSH_COMMAND" not in plain
    assert not (tmp_path / "h" / "id").exists()
    with pytest.raises(GitError, match="not sent there"):
        gitproc.environment(
            tmp_path / "o",
            "ssh://git@other.example/a/x.git",
            Credentials(ssh_private_key="KEY", bound_to="ssh://h.example/a"),
            extra_env={},
            known_hosts=tmp_path / "k",
        )


def test_ssh_reads_the_pinned_options_as_meant(tmp_path: Path) -> None:
    """`ssh -G` prints the configuration ssh would connect with: the options of
    GIT_SSH_COMMAND as the real ssh reads them (no server needed): no config file's
    ProxyCommand or agent, the Secret's host keys and only them, checked strictly."""
    creds = Credentials(ssh_private_key="KEY", known_hosts="h.example ssh-ed25519 AAAA")
    env = gitproc.environment(
        tmp_path,
        "ssh://git@h.example:2222/a/x.git",
        creds,
        extra_env={},
        known_hosts=tmp_path / "k",
    )
    command = shlex.split(env["GIT_SSH_COMMAND"])
    out = subprocess.run(
        [*command, "-G", "-p", "2222", "git@h.example"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    ).stdout
    config = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert config["stricthostkeychecking"] in ("true", "yes")
    assert config["userknownhostsfile"] == str(tmp_path / "known_hosts")
    assert config["globalknownhostsfile"] == "/dev/null"
    assert config["identitiesonly"] == "yes"
    assert config["forwardagent"] == "no"
    assert config["batchmode"] == "yes"
    assert config["identityfile"] == str(tmp_path / "id")
    assert "proxycommand" not in config and "proxyjump" not in config
