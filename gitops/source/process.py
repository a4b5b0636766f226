"""One git command as an asyncio subprocess, sandboxed, for `gitops.source.git`.

Every call runs in its own process group, with a timeout that kills the whole group (git forks
ssh and remote helpers); the event loop never blocks. The sandbox:
- `protocol.allow=never` with only https, http, ssh (and file, for file URLs) allowed back on:
  no `ext::` helpers; hooks go to /dev/null; no system or global config; no terminal prompts;
- credentials never appear on a command line, in a URL handed to git, in the environment of
  other processes, or in messages: HTTPS credentials reach git through a credential helper
  script reading variables set only for that subprocess; an SSH key through a 0600 temp file
  and `GIT_SSH_COMMAND` (no ssh config, no agent; the host pinned by the Secret's known_hosts,
  else its first key kept); git's stderr is scrubbed (`urls.scrub`) and explained in one line
  (`gitmessages.explain`);
- credentials only where they are bound (`Credentials.bound_to`, `urls.Binding`): git runs
  with them only for a URL the binding covers, and the helper answers only requests for the
  bound scheme, host, port and path prefix — a redirect to anywhere else gets none.
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
from urllib.parse import urlsplit

from gitops.engine.urls import (
    Binding,
    Credentials,
    GitError,
    binding_of,
    normalize_repo_url,
    scrub,
    shown,
)
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
HELPER_NAME = "credential-helper.sh"
HELPER = r"""#!/bin/sh
# A git credential helper that answers `get` only for requests its binding covers (the
# same rule as gitops.engine.urls.Binding.covers): after a redirect elsewhere git asks
# again, for the new protocol, host and path, and gets nothing.
[ "$1" = get ] || exit 0
protocol='' host='' path=''
while IFS= read -r line; do
  case "$line" in
    '') break ;;
    protocol=*) protocol=${line#protocol=} ;;
    host=*) host=${line#host=} ;;
    path=*) path=${line#path=} ;;
  esac
done
[ "$protocol" = "$TRAINOPS_GIT_PROTOCOL" ] || exit 0
host=$(printf '%s' "$host" | tr 'A-Z' 'a-z')
[ "$host" = "$TRAINOPS_GIT_HOST" ] || [ "$host" = "$TRAINOPS_GIT_HOST_PORT" ] || exit 0
while :; do case "$path" in /*) path=${path#/} ;; */) path=${path%/} ;; *) break ;; esac; done
case "/$path/" in *%*|*\\*|*\;*|*/./*|*/../*) exit 0 ;; esac
bound=$TRAINOPS_GIT_PATH
if [ -n "$bound" ]; then
  case "$path" in
    "$bound"|"$bound"/*|"$bound".git|"$bound".git/*) ;;
    *) exit 0 ;;
  esac
fi
printf 'username=%s\npassword=%s\n' "$TRAINOPS_GIT_USERNAME" "$TRAINOPS_GIT_PASSWORD"
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
        helper = Path(tmp) / HELPER_NAME
        cmd = [git, *config_args(url, helper if helper.exists() else None), *args]
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


def config_args(url: str | None, helper: Path | None = None) -> list[str]:
    """The `-c` options of the sandbox for a git talking to `url`; `helper`, the credential
    helper `environment` wrote (asked with the path of every request: `useHttpPath`).
    Redirects are followed on the first request only (git's default, said here), and a
    redirect elsewhere gets no credentials from the helper."""
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
        "http.followRedirects=initial",
    ]
    if url is not None and url.startswith("file://"):
        config.append("protocol.file.allow=always")
    if helper is not None:
        config += [f"credential.helper=!{_sh(str(helper))}", "credential.useHttpPath=true"]
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
    """The environment of one git process: no user config, no prompts, and `creds` as a
    credential helper or a 0600 key file in the private directory `tmp`, for `url` alone when
    their binding covers it (GitError otherwise: nothing is sent)."""
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
    if creds is None or url is None or url.startswith("file://"):
        return env
    binding = _binding(url, creds)
    if creds.ssh_private_key and binding.protocol == "ssh":
        key = tmp / "id"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(creds.ssh_private_key.rstrip("\n") + "\n")
        known, checking = known_hosts, "accept-new"
        if creds.known_hosts:  # pinned: these keys and no others
            known, checking = tmp / "known_hosts", "yes"
            known.write_text(creds.known_hosts.rstrip("\n") + "\n")
        env["GIT_SSH_COMMAND"] = (
            f"ssh -F /dev/null -i {_sh(str(key))} -o IdentitiesOnly=yes -o BatchMode=yes "
            f"-o StrictHostKeyChecking={checking} -o UserKnownHostsFile={_sh(str(known))} "
            "-o GlobalKnownHostsFile=/dev/null -o ForwardAgent=no"
        )
    password = creds.password or creds.token
    if password and binding.protocol in ("http", "https"):
        username = creds.username or "x-access-token"
        if any(c in username + password for c in "\n\r\0"):
            raise GitError("the credentials contain a line break or NUL: they are not used")
        helper = tmp / HELPER_NAME
        helper.write_text(HELPER)
        helper.chmod(stat.S_IRWXU)
        env.update(
            {
                "TRAINOPS_GIT_USERNAME": username,
                "TRAINOPS_GIT_PASSWORD": password,
                "TRAINOPS_GIT_PROTOCOL": binding.protocol,
                "TRAINOPS_GIT_HOST": binding.hosts[0],
                "TRAINOPS_GIT_HOST_PORT": binding.hosts[-1],
                "TRAINOPS_GIT_PATH": binding.path,
            }
        )
    return env


def _binding(url: str, creds: Credentials) -> Binding:
    """Where `creds` may go (their `bound_to`, else `url` itself), or GitError when `url`, the
    one git is about to talk to, is not there."""
    binding = binding_of(creds.bound_to or url)
    try:
        target = binding_of(url)
        parts = urlsplit(url if "://" in url else normalize_repo_url(url))
        host = parts.netloc.rpartition("@")[2].lower()
    except (GitError, ValueError):
        target, host = None, ""
    if target is None or not binding.covers(target.protocol, host or target.hosts[0], target.path):
        raise GitError(
            f"the credentials are for {shown(creds.bound_to or url)}, not for {shown(url)}: "
            "they are not sent there"
        )
    return binding


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
