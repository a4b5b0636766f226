"""A remote's refs from one HTTP GET, where that is exactly what `git ls-remote` would learn.

A no-op poll or push trigger asks "where are the branches now?" and nothing else. Over smart
HTTP, git answers it with one `GET <url>/info/refs?service=git-upload-pack`; running git for that
costs a process, its start-up and its own connection (about 13 ms here, against 3 ms for the
GET). So for an anonymous http(s) remote the request is made in-process, and its answer — the
protocol-v0 ref advertisement — parsed here (`parse`, pure).

It stands aside (returns None, and git runs as before) whenever the answer is not plainly what
git would have read: any status but 200 (a redirect, which git follows once, a 401 that needs
credentials), another content type (a dumb-HTTP server), a body over `MAX_BODY` or one that does
not parse, a network or TLS error (git then reports it in its words), and whenever the process
environment configures a proxy, which git would honour and this would not. TLS is verified as
git verifies it: against `GIT_SSL_CAINFO`/`GIT_SSL_CAPATH` when set, else the system's CAs.
Credentials never take this way: they stay with git's bound credential helper. Only a timeout
is final (a GitError, as git's own bound says): git would wait as long again on the same server.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp

from gitops.engine.urls import GitError, shown

__all__ = ["MAX_BODY", "USER_AGENT", "RefReader", "parse", "tls_for", "usable"]

MAX_BODY = 8 << 20
"""Larger advertisements (hundreds of thousands of refs) are left to git."""
USER_AGENT = "git/trainops"
"""Some Git hosts serve the smart protocol only to agents whose name starts with `git/`."""
CONTENT_TYPE = "application/x-git-upload-pack-advertisement"
_PROXY_ENV = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})
_PKT_LENGTH = re.compile(rb"[0-9a-fA-F]{4}")
_REF_LINE = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64}) ([^\s\x00]+)")
_PARSE_IN_THREAD = 256 << 10

Refs = tuple[dict[str, str], str | None]
"""Every ref → sha (peeled tags as `refs/tags/x^{}`), and the branch HEAD points at."""


def usable(url: str, extra_env: Mapping[str, str] = {}) -> bool:
    """Whether `url` (userinfo already removed) may be read in-process rather than by git."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.query or parts.fragment or "@" in parts.netloc:
        return False
    names = {k.lower() for k in os.environ} | {k.lower() for k in extra_env}
    return not names & _PROXY_ENV


@functools.lru_cache(maxsize=8)
def _tls(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """Verification as git's: the CA file or directory it is told (only those), else the
    system's. Cached: loading a CA bundle costs milliseconds."""
    return ssl.create_default_context(cafile=cafile, capath=capath)


def tls_for(extra_env: Mapping[str, str] = {}) -> ssl.SSLContext:
    """The TLS context for the CA settings git would see (`GIT_SSL_CAINFO`, `GIT_SSL_CAPATH`:
    `extra_env` first, then the process's environment)."""

    def setting(name: str) -> str | None:
        return extra_env.get(name) or os.environ.get(name) or None

    return _tls(setting("GIT_SSL_CAINFO"), setting("GIT_SSL_CAPATH"))


def _pkt_lines(body: bytes) -> list[bytes | None] | None:
    """The pkt-lines of `body` (None for a flush-pkt), or None when it is not pkt-line framed."""
    out: list[bytes | None] = []
    i = 0
    while i < len(body):
        head = body[i : i + 4]
        if _PKT_LENGTH.fullmatch(head) is None:
            return None
        n = int(head, 16)
        if n == 0:
            out.append(None)
            i += 4
            continue
        if n < 4 or i + n > len(body):
            return None
        out.append(body[i + 4 : i + n])
        i += n
    return out


def parse(body: bytes) -> Refs | None:
    """The refs of a smart-HTTP upload-pack advertisement (protocol v0), or None when `body` is
    anything else: then git must be asked.

    The shape: `# service=git-upload-pack`, a flush, then `<sha> <ref>` lines (the first with
    `\\0capabilities`, among them `symref=HEAD:<branch>`), then a flush. An empty repository
    advertises only `<zero sha> capabilities^{}`."""
    lines = _pkt_lines(body)
    if not lines or len(lines) < 3:
        return None
    if lines[0] is None or lines[0].rstrip(b"\n") != b"# service=git-upload-pack":
        return None
    if lines[1] is not None or lines[-1] is not None:
        return None
    refs: dict[str, str] = {}
    head: str | None = None
    for index, line in enumerate(lines[2:-1]):
        if line is None:
            return None
        text, _, capabilities = line.rstrip(b"\n").partition(b"\0")
        if capabilities and index != 0:
            return None
        match = _REF_LINE.fullmatch(text)
        if match is None:
            return None
        for capability in capabilities.split():
            if capability.startswith(b"symref=HEAD:"):
                head = capability[len(b"symref=HEAD:") :].decode("utf-8", "replace")
        sha, name = match[1].decode(), match[2].decode("utf-8", "replace")
        if name == "capabilities^{}":
            if len(lines) != 4:
                return None  # only an empty repository sends this line, and it sends no other
            continue
        refs[name] = sha
    if head is not None and "HEAD" not in refs:
        head = None
    return refs, head


class RefReader:
    """Reads advertisements over one HTTP session (kept-alive connections, cached DNS), made on
    first use in the running event loop; `close()` when done (`Git.close`)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            # One per loop: a session is bound to the loop it was made in.
            # As git's sandbox: no proxies or .netrc from the environment, no cookies (one
            # tenant's server must not set what another tenant's request to a shared host
            # carries). The workers bound how many reads are in flight, not the pool: a pool
            # full of one tenant's stalled hosts would make others' reads wait and time out.
            session = self._session = aiohttp.ClientSession(
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                connector=aiohttp.TCPConnector(limit=64, limit_per_host=0),
            )
            self._loop = loop
        return session

    async def read(
        self, url: str, timeout: float, tls: ssl.SSLContext | None = None
    ) -> Refs | None:
        """`url`'s refs from its advertisement, or None: ask git (see the module's docstring)."""
        try:
            async with self._session_here().get(
                url.rstrip("/") + "/info/refs?service=git-upload-pack",
                allow_redirects=False,
                ssl=tls if tls is not None else True,
                headers={"User-Agent": USER_AGENT, "Accept": "*/*", "Pragma": "no-cache"},
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                if response.status != 200 or response.content_type != CONTENT_TYPE:
                    return None
                if (response.content_length or 0) > MAX_BODY:
                    return None
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 << 10):
                    body += chunk
                    if len(body) > MAX_BODY:
                        return None
        except TimeoutError:
            # git would wait as long again for the same server: say it as git's own bound does.
            raise GitError(
                f"timed out after {timeout:g} s trying to list refs of {shown(url)}"
            ) from None
        except (aiohttp.ClientError, ValueError, OSError):
            return None
        if len(body) > _PARSE_IN_THREAD:  # a few ms of Python: not on the event loop
            return await asyncio.to_thread(parse, bytes(body))
        return parse(bytes(body))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()
