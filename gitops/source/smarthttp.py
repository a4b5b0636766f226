"""`git ls-remote` of an anonymous HTTP(S) remote without a git process: one GET of the smart
HTTP ref advertisement (`/info/refs?service=git-upload-pack`, protocol v0), parsed here.

Why: a round whose revision did not move costs its `ls-remote` alone, and with the git CLI that
is three processes (git, its `git-remote-http` helper, and the server's side): 65–400 ms on the
shared 2-core machine (load 12), where the request itself takes a few. Flux's
source-controller asks in process too.

`ls_remote` answers only what it can answer exactly as git would, and returns None for
everything else, which the caller hands to git (`gitops.source.git`): any credentials, any
proxy or git TLS setting in the environment, a redirect (git follows the first one), an
answer that is not a smart v0 advertisement (a dumb server, an error page, 401, 404, …), or
one over `MAX_BYTES`. Git then gives its own answer and its own error messages.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping

import aiohttp

from gitops.engine.urls import GitError, shown

__all__ = ["MAX_BYTES", "falls_back", "ls_remote", "parse_advertisement"]

MAX_BYTES = 32 * 1024 * 1024
"""Largest advertisement read in process (a repository with ~300,000 refs); git reads more."""
_CONTENT_TYPE = "application/x-git-upload-pack-advertisement"
_SHA = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_ENV = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
)
"""Settings git's HTTP transport reads from the environment: with any of them, git asks."""


class NotAdvertisement(ValueError):
    """The body is not a smart HTTP v0 ref advertisement."""


def falls_back(url: str, has_credentials: bool, extra_env: Mapping[str, str]) -> bool:
    """Whether `url` must be listed by git (see the module docstring)."""
    if has_credentials or extra_env:
        return True
    if not url.startswith(("https://", "http://")):
        return True
    return any(os.environ.get(name) for name in _ENV)


def parse_advertisement(body: bytes) -> tuple[dict[str, str], str | None]:
    """(every ref → sha, peeled tags as `refs/tags/x^{}`; the branch HEAD points at) from a
    smart HTTP v0 advertisement, as `git ls-remote --symref` lists them; NotAdvertisement
    otherwise."""
    lines = list(_pkt_lines(body))
    if not lines or lines[0] != b"# service=git-upload-pack\n":
        raise NotAdvertisement("no service line")
    rest = lines[1:]
    if rest and rest[0] is None:
        rest = rest[1:]  # the flush after the service line
    if not rest or rest[-1] is not None:
        raise NotAdvertisement("no flush at the end")
    refs: dict[str, str] = {}
    head: str | None = None
    for i, line in enumerate(rest[:-1]):
        if line is None:
            raise NotAdvertisement("a flush before the end")
        line = line.removesuffix(b"\n")
        if i == 0:
            line, _, caps = line.partition(b"\0")
            for cap in caps.split():
                if cap.startswith(b"symref=HEAD:"):
                    head = cap[len(b"symref=HEAD:") :].decode("utf-8", "replace")
        sha, sep, name = line.partition(b" ")
        if not sep or not _SHA.match(sha) or not name:
            raise NotAdvertisement("a ref line without a sha and a name")
        if i == 0 and name == b"capabilities^{}":
            continue  # an empty repository: no refs
        refs[name.decode("utf-8", "replace")] = sha.decode()
    return refs, head


def _pkt_lines(body: bytes) -> list[bytes | None]:
    """The pkt-lines of `body`, None for a flush packet."""
    out: list[bytes | None] = []
    at = 0
    while at < len(body):
        try:
            size = int(body[at : at + 4], 16)
        except ValueError:
            raise NotAdvertisement("not a pkt-line") from None
        if size == 0:
            out.append(None)
            at += 4
            continue
        if size < 4 or at + size > len(body):
            raise NotAdvertisement("a pkt-line past the end")
        out.append(body[at + 4 : at + size])
        at += size
    return out


async def ls_remote(url: str, timeout: float) -> tuple[dict[str, str], str | None] | None:
    """The remote's refs and HEAD's branch, or None when git must answer (module docstring);
    GitError if the remote does not answer within `timeout` seconds. `url` is anonymous and
    validated (`gitops.engine.urls.validate_url`); the body is bounded by `MAX_BYTES`."""
    target = url.rstrip("/") + "/info/refs?service=git-upload-pack"
    try:
        async with (
            asyncio.timeout(timeout),
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(
                target,
                allow_redirects=False,
                headers={"User-Agent": "trainops-gitops", "Accept": _CONTENT_TYPE},
            ) as response,
        ):
            if response.status != 200 or response.content_type != _CONTENT_TYPE:
                return None
            if (response.content_length or 0) > MAX_BYTES:
                return None
            body = bytearray()
            while chunk := await response.content.read(65536):
                body += chunk
                if len(body) > MAX_BYTES:
                    return None
    except TimeoutError:
        # Not handed to git: a remote that does not answer would cost the timeout twice.
        raise GitError(
            f"timed out after {timeout:g} s trying to list refs of {shown(url)}"
        ) from None
    except (aiohttp.ClientError, OSError, ValueError):
        return None  # git tries, and says what failed in its words
    try:
        return parse_advertisement(bytes(body))
    except NotAdvertisement:
        return None
