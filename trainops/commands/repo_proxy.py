"""`trainops repo` through the API server's service proxy (`repo_target` says how and why).

The requests go through `kube.Client` (the kubeconfig's server, TLS and credentials, exec
plugins and token files included). The API server's own refusals (a `Status`: no such Service,
no ready endpoint, credentials refused, RBAC) become one line naming the server and the
kubeconfig; the trainops API's answers (`{"error": …}`) go back to `repo`'s usual handling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from trainops.commands.repo_target import (
    SERVICE,
    SERVICE_NAMESPACE,
    Choice,
    cookie_safe,
    proxy_request,
)

__all__ = ["proxied_send"]

Send = Callable[[str, str, Any], Awaitable[tuple[int, str]]]
_SERVICE = f"service {SERVICE_NAMESPACE}/{SERVICE}"
_RIGHTS = f"the service proxy needs get, create and delete on services/proxy in {SERVICE_NAMESPACE}"


@asynccontextmanager
async def proxied_send(choice: Choice, timeout: float) -> AsyncIterator[tuple[Send, str]]:
    """`send(method, path, body) -> (status, text)` to the trainops API through the proxy, and
    how to name it in messages. Raises `repo.Failure` (one line) when it cannot be reached."""
    from kube import errors
    from kube.client import Client
    from kube.config import ConfigError
    from trainops.commands.repo import Failure

    try:
        client = await Client.connect(
            choice.kubeconfig, timeout=timeout, field_manager="trainops-repo"
        )
    except OSError as e:
        raise Failure(f"{choice.why}: {e.strerror or e}") from None
    except ConfigError as e:
        raise Failure(f"{choice.why}: not a usable kubeconfig ({e})") from None
    except Exception as e:  # nothing else is expected; still one line, never a traceback
        raise Failure(f"{choice.why}: not usable ({' '.join(str(e).split())})") from None
    try:
        token = choice.token or client.bearer_token
        if not token:
            raise Failure(
                f"{choice.why}: its user has no bearer token (a client certificate?), and the "
                "trainops API needs the user's token, which the API server's proxy does not "
                "pass on: pass --token (e.g. `kubectl create token SERVICEACCOUNT`) or set "
                "$TRAINOPS_TOKEN"
            )
        if not cookie_safe(token):
            raise Failure("the token has characters a cookie cannot carry (spaces, ;, quotes)")
        host = client.host
        where = f"{host} ({_SERVICE} through the API server's proxy)"

        async def send(method: str, path: str, body: Any) -> tuple[int, str]:
            full, headers = proxy_request(path, token)
            try:
                data: bytes = await client.request(
                    method, full, body=body, raw=True, headers=headers, timeout=timeout
                )
            except errors.APIError as e:
                if e.status == 0:
                    raise Failure(
                        f"cannot reach the API server {host} ({choice.why}): {e.message}"
                    ) from None
                if e.body.get("kind") != "Status":
                    return e.status, e.message  # the trainops API's own answer
                raise Failure(_refusal(e.status, e.message, host, choice.why)) from None
            return 200, data.decode("utf-8", "replace")

        yield send, where
    finally:
        await client.close()


def _refusal(status: int, message: str, host: str, why: str) -> str:
    """One line for the API server's own refusal of a proxied request."""
    if status == 404:
        return (
            f"no trainops API in the cluster at {host} ({why}): {message} ({_SERVICE}: install "
            "deploy/, or start `trainops up --repo GIT_URL`, or pass --server URL)"
        )
    if status == 503:
        return f"the trainops API in the cluster at {host} does not answer ({why}): {message}"
    if status == 401:
        return f"the API server {host} refused the credentials of {why} (401 Unauthorized)"
    if status == 403:
        return f"the API server {host} refused ({why}): {message} ({_RIGHTS})"
    return f"the API server {host} ({why}) answered {status}: {message}"
