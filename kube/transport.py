"""HTTP to the API server through `kubernetes_asyncio`'s ApiClient, bounded in time, with every
failure turned into a `kube.errors.APIError`.

Split from `kube.client` (which knows the API's verbs, paths and options) so the two hard
transport concerns live in one short place: nothing may wait forever on a hung server, and no
aiohttp or socket exception may leak to product code. The ApiClient contributes what is the same
for every call — host, TLS, the bearer token (refreshed by its configuration) — and answers are
read raw (`_preload_content=False`) and parsed here, never through the generated models.

Proxies from the environment (HTTPS_PROXY, NO_PROXY, …) are looked up once, when the transport
is made, and pinned on the session: the ApiClient's session "trusts the environment", which in
aiohttp means reading the proxy variables and ~/.netrc again, in a thread, for every request —
a third of a controller's CPU under load (docs/PERFORMANCE.md). A proxy named in the kubeconfig
(`proxy-url`) wins, as before; credentials never came from ~/.netrc for an API server.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from kube.errors import Unavailable, from_response

__all__ = ["JSON", "Transport", "describe", "impersonation_headers", "query_params"]

JSON = "application/json"


class Transport:
    """Requests over one ApiClient (and its aiohttp session)."""

    def __init__(
        self,
        api_client: Any,
        *,
        owns: bool = True,
        impersonate: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.api_client = api_client
        self.owns = owns
        """Whether `close` closes the ApiClient (a view sharing another's session does not)."""
        self.impersonate = impersonate
        """(user, groups) every request acts as (`impersonation_headers`), or None."""
        if owns:
            _pin_env_proxy(api_client)

    async def close(self) -> None:
        if self.owns:
            await self.api_client.close()

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any],
        body: Any,
        content_type: str,
        accept: str,
        timeout: float,
    ) -> bytes:
        """One request with its whole answer read within `timeout` seconds; a non-2xx answer
        raises its APIError, a timeout or connection failure Unavailable (status 0)."""
        try:
            async with asyncio.timeout(timeout):
                resp = await self._open(
                    method,
                    path,
                    query,
                    body=body,
                    content_type=content_type,
                    accept=accept,
                    client_timeout=aiohttp.ClientTimeout(total=timeout),
                )
                try:
                    data: bytes = await resp.read()
                finally:
                    resp.release()
        except TimeoutError as e:
            raise Unavailable(
                0, "Timeout", f"{method} {path}: no answer within {timeout:g}s"
            ) from e
        except (aiohttp.ClientError, OSError) as e:
            raise Unavailable(0, "ConnectionError", f"{method} {path}: {describe(e)}") from e
        if not 200 <= resp.status <= 299:
            raise from_response(resp.status, data)
        return data

    async def lines(
        self,
        path: str,
        query: Mapping[str, Any],
        *,
        accept: str,
        open_timeout: float,
        deadline: float | None,
        idle_timeout: float | None,
    ) -> AsyncGenerator[bytes, None]:
        """The non-empty lines of a streamed GET. The answer's headers must come within
        `open_timeout`; the stream ends with Unavailable at `deadline` (event-loop time) or
        after `idle_timeout` seconds without a byte (each unbounded when None). The response
        is closed however the iteration ends."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(open_timeout):
                resp = await self._open(
                    "GET",
                    path,
                    query,
                    body=None,
                    content_type=JSON,
                    accept=accept,
                    client_timeout=aiohttp.ClientTimeout(
                        total=None, connect=open_timeout, sock_connect=open_timeout
                    ),
                )
                if not 200 <= resp.status <= 299:
                    try:
                        data = await resp.read()
                    finally:
                        resp.release()
                    raise from_response(resp.status, data)
        except TimeoutError as e:
            raise Unavailable(
                0, "Timeout", f"GET {path}: no answer within {open_timeout:g}s"
            ) from e
        except (aiohttp.ClientError, OSError) as e:
            raise Unavailable(0, "ConnectionError", f"GET {path}: {describe(e)}") from e
        buffer = b""
        try:
            while True:
                limit = deadline
                if idle_timeout is not None:
                    idle = loop.time() + idle_timeout
                    limit = idle if limit is None else min(limit, idle)
                try:
                    async with asyncio.timeout_at(limit):
                        chunk = await resp.content.readany()
                except TimeoutError as e:
                    raise Unavailable(0, "Timeout", f"GET {path}: stream stalled") from e
                except (aiohttp.ClientError, OSError) as e:
                    raise Unavailable(0, "ConnectionError", f"GET {path}: {describe(e)}") from e
                if not chunk:
                    if buffer.strip():
                        yield buffer
                    return
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield line
        finally:
            resp.close()

    async def _open(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any],
        *,
        body: Any,
        content_type: str,
        accept: str,
        client_timeout: aiohttp.ClientTimeout,
    ) -> Any:
        """Send the request on the ApiClient's session with its credentials, host, TLS and
        proxy; the raw aiohttp response. Not through `ApiClient.call_api`: that walks every
        body in Python (`sanitize_for_serialization`) and encodes it with the json module,
        which cost more than the rest of a request (docs/PERFORMANCE.md); orjson encodes it
        here, and bytes are sent as they are."""
        api = self.api_client
        headers: dict[str, str] = dict(api.default_headers)
        if api.cookie:
            headers["Cookie"] = api.cookie
        headers["Accept"] = accept
        headers["Content-Type"] = content_type
        params = query_params(query)
        await api.update_params_for_auth(headers, params, ["BearerToken"])
        rest = api.rest_client
        url = str(api.configuration.host) + path
        if params:
            url += "?" + urlencode(params)
        data: bytes | None = None
        if isinstance(body, bytes | bytearray):
            data = bytes(body)
        elif isinstance(body, str) and "json" not in content_type:
            data = body.encode()
        elif body is not None:
            data = orjson.dumps(body)
        extra: dict[str, Any] = {}
        if rest.proxy:
            extra["proxy"] = rest.proxy
        if rest.proxy_headers:
            extra["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            extra["server_hostname"] = rest.server_hostname
        sent: Any = headers
        if self.impersonate is not None:
            sent = impersonation_headers(headers, *self.impersonate)
        return await rest.pool_manager.request(
            method, url, headers=sent, data=data, timeout=client_timeout, **extra
        )


def _pin_env_proxy(api_client: Any) -> None:
    """Resolve the environment's proxy for the API server once and stop the session from
    looking it (and ~/.netrc) up per request (module docstring)."""
    rest = getattr(api_client, "rest_client", None)
    session = getattr(rest, "pool_manager", None)
    if rest is None or not isinstance(session, aiohttp.ClientSession) or not session.trust_env:
        return
    if not getattr(rest, "proxy", None):
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        try:
            proxy, auth = get_env_proxy_for_url(URL(str(api_client.configuration.host)))
        except LookupError:
            pass
        else:
            rest.proxy = str(proxy)
            if auth is not None:
                headers = dict(getattr(rest, "proxy_headers", None) or {})
                headers["Proxy-Authorization"] = auth.encode()
                rest.proxy_headers = headers
    session._trust_env = False  # aiohttp has no public setter; the attribute is in its ATTRS


def impersonation_headers(headers: Mapping[str, str], user: str, groups: tuple[str, ...]) -> Any:
    """`headers` plus `Impersonate-User: user` and one `Impersonate-Group` header per group, as
    the API server wants them (it does not split a comma-separated value): a multi-valued
    mapping, which aiohttp sends as it is."""
    from multidict import CIMultiDict

    multi: CIMultiDict[str] = CIMultiDict()
    for key, value in headers.items():
        if not key.lower().startswith("impersonate-"):
            multi.add(key, value)
    multi.add("Impersonate-User", user)
    for group in groups:
        multi.add("Impersonate-Group", group)
    return multi


def query_params(query: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query parameters as the API server reads them: None left out, bools as true/false."""
    params = []
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params.append((key, "true" if value else "false"))
        else:
            params.append((key, str(value)))
    return params


def describe(e: BaseException) -> str:
    """A connection failure in words: `cannot connect to 127.0.0.1:1: connection refused`,
    never an aiohttp repr (ConnectionKey and all)."""
    if isinstance(e, aiohttp.ClientConnectorError):
        return f"cannot connect to {e.host}:{e.port}: {_reason(e.os_error)}"
    if isinstance(e, OSError):
        return _reason(e)
    return str(e) or type(e).__name__


def _reason(e: OSError) -> str:
    """`connection refused`: the errno's words (asyncio's strerror names the address again),
    else the exception's own text (a TLS failure's: ssl's errno is not the system's)."""
    if isinstance(e, ssl.SSLError):
        return str(getattr(e, "verify_message", None) or e.reason or e)
    if e.errno:
        return os.strerror(e.errno).lower()
    return str(e.strerror or e or type(e).__name__)
