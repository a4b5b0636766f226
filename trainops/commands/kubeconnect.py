"""Connecting a command to its API server: one line naming the file or server when it cannot.

`trainops up` and `trainops controller` both start by connecting here. The kubeconfig is read,
the server asked for `/version` and one list the command needs (credentials accepted and
allowed), each within `CONNECT_TIMEOUT`: a wrong file, server or token is then one line before
anything starts, not a traceback or an endless retry later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kube.client import Client

__all__ = [
    "CONNECT_TIMEOUT",
    "StartError",
    "connect",
    "default_kubeconfig",
    "describe_api_error",
    "server_of",
]

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the API server's first answer before calling it unreachable."""


class StartError(RuntimeError):
    """A reason a command cannot start, already worded for the user (one line)."""


def server_of(kubeconfig: Path) -> str | None:
    """The server URL of `kubeconfig`'s current context, read from the file alone; None when
    the file cannot say (`connect` then reports what is wrong with it)."""
    import yaml

    try:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(
            c["context"] for c in config["contexts"] if c["name"] == config["current-context"]
        )
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        return str(cluster["server"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration):
        return None


def default_kubeconfig() -> Path | None:
    """The kubeconfig a command without `--kubeconfig` names in its messages: None in a pod
    (in-cluster credentials), else the first of $KUBECONFIG (all of them are merged) or
    ~/.kube/config."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return Path(paths[0]).expanduser() if paths else Path.home() / ".kube" / "config"


async def connect(
    kubeconfig: Path | None,
    *,
    field_manager: str,
    probe: str = "/api/v1/namespaces",
    command: str = "trainops up",
    qps: float | None = None,
    burst: int | None = None,
) -> Client:
    """A client that has been answered once, from `kubeconfig` (None: `default_kubeconfig()`).

    `probe` is a list the command's credentials must be allowed (`/version` is public).
    `StartError` names the file or the server when the file is unusable, the server unreachable
    or the credentials refused."""
    from kube import errors
    from kube.client import Client
    from kube.config import ConfigError

    flag = "--kubeconfig" if kubeconfig is not None else "kubeconfig"
    explicit = kubeconfig
    if kubeconfig is None:
        kubeconfig = default_kubeconfig()
    try:
        if kubeconfig is not None and (explicit is not None or not os.environ.get("KUBECONFIG")):
            # Read first: a missing file is then the OS's words, naming the flag. (Entries of
            # $KUBECONFIG that do not exist are skipped, as kubectl skips them.)
            kubeconfig.read_bytes()
        # Without --kubeconfig: in-cluster, or every file of $KUBECONFIG merged as kubectl does.
        client = await Client.connect(
            explicit, field_manager=field_manager, qps=qps or None, burst=burst or None
        )
    except OSError as e:
        raise StartError(f"{flag} {kubeconfig}: {e.strerror or e}") from None
    except ConfigError as e:  # names the file (or plugin) and the field
        detail = f"{e.field}: {e.detail}" if e.field and e.source == str(kubeconfig) else str(e)
        if kubeconfig is None:
            raise StartError(f"in-cluster credentials: not usable ({detail})") from None
        raise StartError(f"{flag} {kubeconfig}: not a usable kubeconfig ({detail})") from None
    except Exception as e:  # nothing else is expected; still one line, never a traceback
        detail = " ".join(str(e).split()) or type(e).__name__
        if kubeconfig is None:
            raise StartError(f"in-cluster credentials: not usable ({detail})") from None
        raise StartError(f"{flag} {kubeconfig}: not a usable kubeconfig ({detail})") from None
    source = kubeconfig if kubeconfig is not None else "in-cluster credentials"
    try:
        await client.request("GET", "/version", timeout=CONNECT_TIMEOUT)
        await client.request("GET", probe, query={"limit": 1}, timeout=CONNECT_TIMEOUT)
    except errors.APIError as e:
        await client.close()
        raise StartError(describe_api_error(e, client.host, source, command=command)) from None
    return client


def describe_api_error(
    error: Any, server: str, kubeconfig: Path | str, *, command: str = "trainops up"
) -> str:
    """One line for an `kube.errors.APIError` met while starting, naming server and file."""
    from kube import errors

    if isinstance(error, errors.Unavailable) and error.status == 0:
        return (
            f"cannot reach the API server {server} (from {kubeconfig}) within "
            f"{CONNECT_TIMEOUT:.0f} s: {error.message}"
        )
    if isinstance(error, errors.Unauthorized):
        return f"the API server {server} refused the credentials in {kubeconfig} (401 Unauthorized)"
    if isinstance(error, errors.Forbidden):
        return (
            f"the credentials in {kubeconfig} lack a permission {command} needs on {server}: "
            f"{error.message}"
        )
    return f"the API server {server} (from {kubeconfig}) answered {error.status}: {error.message}"
