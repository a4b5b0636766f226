"""HTTP to the API server over one aiohttp session, bounded in time, with every failure turned
into a `kube.errors.APIError`.

Split from `kube.client` (which knows the API's verbs, paths and options) so the two hard
transport concerns live in one short place: nothing may wait forever on a hung server, and no
aiohttp or socket exception may leak to product code. `kube.auth` supplies what is the same for
every call — the TLS context and the Authorization header, both kept current (token files
re-read, exec credentials renewed) — and a 401 is retried once when it renewed something.
Answers are read raw and parsed by the caller; bodies are encoded with orjson.

Proxies: a kubeconfig's `proxy-url` wins; else the environment's (HTTPS_PROXY, NO_PROXY, …),
looked up once, when the transport is made. The session does not "trust the environment":
in aiohttp that means reading the proxy variables and ~/.netrc again, in a thread, for every
request — a third of a controller's CPU under load (docs/PERFORMANCE.md); credentials never
come from ~/.netrc for an API server.
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

from kube.auth import Auth
from kube.config import ConfigError
from kube.errors import Unavailable, from_response
from kube.ratelimit import RateLimiter

__all__ = ["JSON", "Transport", "describe", "env_proxy", "impersonation_headers", "query_params"]

JSON = "application/json"


_OWN_HEADERS = ("authorization", "accept", "content-type", "user-agent")
"""Headers a request's extra headers cannot set: the transport's own (credentials included)."""


class _Pool:
    """The aiohttp session, made at the first request (inside the event loop) and shared by
    a transport and its impersonating views."""

    def __init__(self, max_connections: int, rate_limiter: RateLimiter | None = None) -> None:
        self.max_connections = max_connections
        self.rate_limiter = rate_limiter
        """Every request of the transport and its views waits its turn here (None: no limit)."""
        self.session: aiohttp.ClientSession | None = None
        self.closed = False

    def get(self) -> aiohttp.ClientSession:
        """The session; after `close`, every request fails (Unavailable, status 0)."""
        if self.closed:
            raise Unavailable(0, "ClientClosed", "the client was closed")
        if self.session is None:
            connector = aiohttp.TCPConnector(limit=self.max_connections)
            self.session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self.session

    async def close(self) -> None:
        self.closed = True
        if self.session is not None:
            await self.session.close()


class Transport:
    """Requests to one API server with one identity's credentials."""

    def __init__(
        self,
        auth: Auth,
        *,
        user_agent: str,
        max_connections: int = 100,
        rate_limiter: RateLimiter | None = None,
        impersonate: tuple[str, tuple[str, ...]] | None = None,
        _pool: _Pool | None = None,
    ) -> None:
        self.auth = auth
        self.owns = _pool is None
        """Whether `close` closes the session (a view sharing another's does not)."""
        self._pool = _pool or _Pool(max_connections, rate_limiter)
        self.impersonate = impersonate
        """(user, groups) every request acts as (`impersonation_headers`), or None."""
        self.host = auth.config.server
        self.proxy = auth.config.proxy_url or env_proxy(self.host)
        """The proxy requests go through, None for a direct connection."""
        self._headers = {"User-Agent": user_agent}

    def view(self, impersonate: tuple[str, tuple[str, ...]]) -> Transport:
        """The same server, session and credentials, every request acting as `impersonate`."""
        found = Transport(
            self.auth,
            user_agent=self._headers["User-Agent"],
            impersonate=impersonate,
            _pool=self._pool,
        )
        found.proxy = self.proxy
        return found

    async def close(self) -> None:
        if self.owns:
            await self._pool.close()

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
        headers: Mapping[str, str] | None = None,
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
                    extra_headers=headers,
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
        extra_headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send the request with the current credentials; the raw aiohttp response. A 401 is
        retried once when the credentials changed since (`Auth.unauthorized`). Waits its turn
        first when the client is rate-limited (`kube.ratelimit`)."""
        if self._pool.rate_limiter is not None:
            await self._pool.rate_limiter.wait()
        url = self.host + path
        params = query_params(query)
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
        if self.proxy:
            extra["proxy"] = self.proxy
        if self.auth.config.tls_server_name:
            extra["server_hostname"] = self.auth.config.tls_server_name
        session = self._pool.get()
        for attempt in (1, 2):
            headers: dict[str, str] = {
                k: v
                for k, v in (extra_headers or {}).items()
                if k.lower() not in _OWN_HEADERS and not k.lower().startswith("impersonate-")
            }
            headers.update(self._headers)
            headers["Accept"] = accept
            headers["Content-Type"] = content_type
            try:
                authorization = await self.auth.authorization()
            except ConfigError as e:
                raise Unavailable(0, "CredentialError", str(e)) from e
            if authorization:
                headers["Authorization"] = authorization
            sent: Any = headers
            if self.impersonate is not None:
                sent = impersonation_headers(headers, *self.impersonate)
            resp = await session.request(
                method,
                url,
                headers=sent,
                data=data,
                timeout=client_timeout,
                ssl=self.auth.ssl_context,
                **extra,
            )
            if resp.status != 401 or attempt == 2 or not self.auth.refreshable:
                return resp
            try:
                renewed = await self.auth.unauthorized(authorization)
            except ConfigError as e:
                resp.release()
                raise Unavailable(0, "CredentialError", str(e)) from e
            if not renewed:
                return resp
            resp.release()
        raise AssertionError("unreachable")


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY
    covers the host), with its credentials; None for a direct connection."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return None
    if auth is not None:
        proxy = proxy.with_user(auth.login).with_password(auth.password)
    return str(proxy)


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
