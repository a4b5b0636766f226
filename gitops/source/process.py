"""One git command as an asyncio subprocess, sandboxed, for `gitops.source.git`.

Every call runs in its own process group, with a timeout that kills the whole group (git forks
ssh and remote helpers); the event loop never blocks. The sandbox:
- `protocol.allow=never` with only https, http, ssh (and file, for file URLs) allowed back on:
  no `ext::` helpers; hooks go to /dev/null; no system or global config; no terminal prompts;
- credentials never appear on a command line, in a URL handed to git, in the environment of
  other processes, or in messages: HTTPS credentials reach git through a GIT_ASKPASS script
  reading variables set only for that subprocess; an SSH key through a 0600 temp file and
  `GIT_SSH_COMMAND`; git's stderr is scrubbed (`giturls.scrub`) and explained in one line
  (`gitmessages.explain`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gitops.engine.urls import Credentials, GitError, scrub, shown
from gitops.source import messages as gitmessages

__all__ = ["config_args", "environment", "run_bytes"]

ENV_PASSTHROUGH = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
ASKPASS = """#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$TRAINOPS_GIT_USERNAME" ;;
  *) printf '%s\\n' "$TRAINOPS_GIT_PASSWORD" ;;
esac
"""


async def run_bytes(
    args: list[str],
    *,
    git: str,
    timeout: float,
    extra_env: Mapping[str, str],
    known_hosts: Path,
    killed: set[str],
    url: str | None = None,
    creds: Credentials | None = None,
    env: Mapping[str, str] | None = None,
    what: str,
    input: bytes | None = None,
) -> bytes:
    """git's stdout for `git <args>`, or GitError (scrubbed and explained) on failure or after
    `timeout` seconds. `extra_env` adds to the environment (ours wins), `env` to this call's;
    `known_hosts` is the file ssh records hosts in; the `--git-dir` of a git killed on
    timeout or cancellation is added to `killed` (its lock files are stale)."""
    secrets = creds.secrets() if creds else ()
    with tempfile.TemporaryDirectory(prefix="trainops-git-") as tmp:
        full_env = environment(Path(tmp), url, creds, extra_env=extra_env, known_hosts=known_hosts)
        full_env.update(env or {})
        cmd = [git, *config_args(url), *args]
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
                start_new_session=True,
            )
        except OSError as e:
            raise GitError(f"cannot run git: {e.strerror}") from None
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see kube.leader
                out, err = await proc.communicate(input)
        except (TimeoutError, asyncio.CancelledError) as e:
            _kill_group(proc)
            if "--git-dir" in args:  # its lock files are stale now: `Git._repo` removes them
                killed.add(args[args.index("--git-dir") + 1])
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await proc.wait()
            if isinstance(e, asyncio.CancelledError):
                raise
            target = f" {shown(url)}" if url else ""
            raise GitError(f"git timed out after {timeout:g} s trying to {what}{target}") from None
    if proc.returncode != 0:
        text = scrub(err.decode("utf-8", "replace"), secrets)
        raise GitError(gitmessages.explain(text, what, f" {shown(url)}" if url else ""))
    return out


def config_args(url: str | None) -> list[str]:
    """The `-c` options of the sandbox for a git talking to `url`."""
    config = [
        "protocol.allow=never",
        "protocol.https.allow=always",
        "protocol.http.allow=always",
        "protocol.ssh.allow=always",
        "core.hooksPath=/dev/null",
        "credential.helper=",
        "core.askPass=",
        "advice.detachedHead=false",
        "gc.auto=0",
    ]
    if url is not None and url.startswith("file://"):
        config.append("protocol.file.allow=always")
    out: list[str] = []
    for item in config:
        out += ["-c", item]
    return out


def environment(
    tmp: Path,
    url: str | None,
    creds: Credentials | None,
    *,
    extra_env: Mapping[str, str],
    known_hosts: Path,
) -> dict[str, str]:
    """The environment of one git process: no user config, no prompts, and `creds` as an
    askpass script or a 0600 key file in the private directory `tmp`."""
    env = {k: os.environ[k] for k in ENV_PASSTHROUGH if k in os.environ}
    env.update(extra_env)
    env.update(
        {
            "HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
            "LC_ALL": "C",
        }
    )
    if creds is None:
        return env
    if creds.ssh_private_key:
        key = tmp / "id"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(creds.ssh_private_key.rstrip("\n") + "\n")
        known = known_hosts
        env["GIT_SSH_COMMAND"] = (
            f"ssh -i {_sh(str(key))} -o IdentitiesOnly=yes -o BatchMode=yes "
            f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={_sh(str(known))}"
        )
    password = creds.password or creds.token
    if password:
        askpass = tmp / "askpass.sh"
        askpass.write_text(ASKPASS)
        askpass.chmod(stat.S_IRWXU)
        env["GIT_ASKPASS"] = str(askpass)
        env["TRAINOPS_GIT_USERNAME"] = creds.username or "x-access-token"
        env["TRAINOPS_GIT_PASSWORD"] = password
    return env


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
