"""A Git remote over smart HTTP on loopback: `git http-backend` (the CGI git ships) behind a
small aiohttp server, optionally behind Basic authentication, recording what each request
carried. A static server of `update-server-info` files cannot answer the shallow fetch GitOps
makes; this one answers everything a real Git host does for clone and fetch.
"""

from __future__ import annotations

import asyncio
import base64
import posixpath
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from aiohttp import web

__all__ = ["GitHttp", "serve_git_http"]

_CGI_TIMEOUT = 60.0


@dataclass
class GitHttp:
    """The running server: `url_of(bare)` is a repository's clone URL."""

    base: str
    authorizations: list[str | None] = field(default_factory=list)
    """The Authorization header of every request, None where there was none."""
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    """Every request's path as a server that decodes and resolves it reads it (`%2e%2e` and
    `..` resolved), with its Authorization header."""

    def url_of(self, name: str) -> str:
        return f"{self.base}/{name}"


@asynccontextmanager
async def serve_git_http(
    root: Path,
    *,
    username: str | None = None,
    password: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    redirect: Callable[[str], str | None] | None = None,
    redirect_status: int = 302,
    redirect_after_auth: bool = False,
) -> AsyncIterator[GitHttp]:
    """Serve every bare repository under `root` at http://HOST:PORT/<name> (`port` 0: a free
    one); with `username`/`password`, only to requests carrying them (401 otherwise, as a Git
    host).

    `redirect(path)` (the resolved path, query excluded) may name where to send a request
    instead, answered with `redirect_status` — before authentication, or only once the
    request carries the credentials (`redirect_after_auth`); the query string is kept."""
    expected = None
    if username is not None:
        token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
        expected = f"Basic {token}"
    server = GitHttp("")

    async def handle(request: web.Request) -> web.StreamResponse:
        given = request.headers.get("Authorization")
        server.authorizations.append(given)
        raw = request.raw_path.partition("?")[0]
        path = posixpath.normpath(unquote(unquote(raw)))
        server.requests.append((path, given))
        target = redirect(path) if redirect is not None else None
        authorized = expected is None or given == expected
        if target is not None and (authorized or not redirect_after_auth):
            query = f"?{request.query_string}" if request.query_string else ""
            raise _redirect(redirect_status, target + query)
        if not authorized:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        body = await request.read()
        env = {
            "GIT_PROJECT_ROOT": str(root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": request.query_string,
            "REQUEST_METHOD": request.method,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "REMOTE_USER": username or "",
            "HTTP_GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
            "PATH": "/usr/bin:/bin",
        }
        proc = await asyncio.create_subprocess_exec(
            "git",
            "http-backend",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(proc.communicate(body), _CGI_TIMEOUT)
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name.strip()] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.base = f"http://{host}:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


def _redirect(status: int, location: str) -> web.HTTPException:
    kinds: dict[int, type[web.HTTPMove]] = {
        301: web.HTTPMovedPermanently,
        302: web.HTTPFound,
        303: web.HTTPSeeOther,
        307: web.HTTPTemporaryRedirect,
        308: web.HTTPPermanentRedirect,
    }
    return kinds[status](location)
