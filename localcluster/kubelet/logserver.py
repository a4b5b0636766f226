"""The kubelet's HTTPS endpoint: `GET /containerLogs/{namespace}/{pod}/{container}`, and on the
same port `/exec/{namespace}/{pod}/{container}` (`execserver.py`) and
`/portForward/{namespace}/{pod}` (`portforward.py`).

As in Kubernetes, the API server serves `pods/log` by asking the kubelet of the pod's node (the
port is published in the Node's `status.daemonEndpoints.kubeletEndpoint.Port`). Query options:
`follow`, `tailLines`, `sinceSeconds`, `sinceTime`, `timestamps`, `previous`, `limitBytes`.
Errors answer with a `Status` object carrying the messages the real components use.

Served over HTTPS, as a kubelet serves it: kube-apiserver speaks only TLS to kubelets (and,
without `--kubelet-certificate-authority`, does not verify their certificate). Like a kubelet
started without `--tls-cert-file`, it makes a self-signed pair (`DATA_DIR/kubelet-tls/`) at start.

Every client must present a certificate signed by `client_ca` (a kubelet's `--client-ca-file`):
the one the API server presents (kube-apiserver's `--kubelet-client-certificate`, the embedded
server's `DATA_DIR/pki/kubelet-client.crt`). Without one the TLS handshake fails, so another user
of this machine cannot read pod logs from the port; nothing is served unauthenticated, not even
`/healthz`.

`previous` is the instance the pod's status shows in the container's `lastState.terminated`
(`last_terminated`), as the kubelet's `validateContainerLogStatus` picks it: the one before
the current instance while the current runs or has ended for good, but the instance that just
ended while the container waits in CrashLoopBackOff (a waiting container's `lastState` is
its latest run). Without a reported status, the instance before the latest.

Reads run in a worker thread; `follow` polls the file (there is no portable async file watch) and
ends when the container instance has finished and everything it wrote was sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import aiohttp
from aiohttp import web

from localcluster.kubelet.logs import LogOptions, parse_log, parse_time, render, select_log
from localcluster.kubelet.runtime import Runtime

__all__ = ["LogServer", "Routes"]

log = logging.getLogger(__name__)


class Routes(Protocol):
    """A server of more endpoints on the same port (exec, port-forward)."""

    def add_routes(self, app: web.Application) -> None: ...


FOLLOW_POLL_SECONDS = 0.1
SHUTDOWN_SECONDS = 2.0


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.Response(status=code, text=json.dumps(body), content_type="application/json")


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() in ("true", "1", "")


def _int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    return int(raw)


class LogServer:
    """Serves container logs from the runtime's files; `lookup(ns, name)` gives the pod uid."""

    def __init__(
        self,
        runtime: Runtime,
        lookup: Callable[[str, str], str | None],
        *,
        client_ca: bytes,
        streaming: Sequence[Routes] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        last_terminated: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.lookup = lookup
        # (uid, container) -> the containerID of the reported lastState.terminated, if any
        self.last_terminated = last_terminated
        self.client_ca = client_ca
        self.streaming = tuple(streaming)
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_get("/healthz", _healthz)
        for server in self.streaming:
            server.add_routes(app)
        return app

    async def start(self) -> int:
        # A request still streaming when the kubelet stops is cut after this (aiohttp's
        # default is 60 s): `up` must not wait on a `kubectl logs -f` it is shutting down.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._tls())
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    def _tls(self) -> ssl.SSLContext:
        from certs import pki

        ca = pki.new_ca("trainops-kubelet-ca")
        tls_dir = self.runtime.data_dir / "kubelet-tls"
        serving = pki.new_serving_cert(ca, [self.host, "localhost"])
        pki.write_bundle(tls_dir, ca, serving, cert_mode=0o600)  # in the private data dir
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls_dir / pki.CERT_FILE, tls_dir / pki.KEY_FILE)
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=self.client_ca.decode("ascii", "replace"))
        return context

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        try:
            tail = _int(request, "tailLines")
            since_seconds = _int(request, "sinceSeconds")
            limit = _int(request, "limitBytes")
            since_time = request.query.get("sinceTime")
            since = parse_time(since_time) if since_time else None
        except ValueError as e:
            return _status(400, "BadRequest", f"invalid log options: {e}")
        if since_seconds is not None:
            since = datetime.now(UTC) - timedelta(seconds=since_seconds)
        options = LogOptions(_flag(request, "timestamps"), tail, since, limit)
        previous = _flag(request, "previous") if "previous" in request.query else False
        follow = _flag(request, "follow") if "follow" in request.query else False

        uid = self.lookup(ns, pod)
        if uid is None:
            return _status(404, "NotFound", f'pods "{pod}" not found')
        instances = await asyncio.to_thread(self.runtime.instances, uid, container)
        if previous:
            shown = self.last_terminated(uid, container) if self.last_terminated else None
            found = [i for i in instances if shown is not None and i.container_id == shown]
            if found:
                inst = found[-1]
            elif len(instances) < 2:
                return _status(
                    400,
                    "BadRequest",
                    f'previous terminated container "{container}" in pod "{pod}" not found',
                )
            else:
                inst = instances[-2]
        else:
            if not instances:
                return _status(
                    400,
                    "BadRequest",
                    f'container "{container}" in pod "{pod}" is waiting to start: '
                    "ContainerCreating",
                )
            inst = instances[-1]
        path = self.runtime.log_path(uid, container, inst.attempt)
        data = await asyncio.to_thread(_read, path)
        body = select_log(data, options)
        if not follow or not inst.running or previous:
            return web.Response(body=body, content_type="text/plain")

        resp = web.StreamResponse()
        resp.content_type = "text/plain"
        await resp.prepare(request)
        try:
            await self._follow(request, resp, options, (uid, container, inst.attempt), data, body)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            # The reader left (`kubectl logs -f` stopped, a browser closed a followed log: the
            # API server then drops our connection): nobody to answer, nothing went wrong.
            log.debug("log follow of %s/%s/%s ended: the reader left", ns, pod, container)
            return resp
        await resp.write_eof()
        return resp

    async def _follow(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        options: LogOptions,
        instance: tuple[str, str, int],
        data: bytes,
        body: bytes,
    ) -> None:
        """Send the log's tail, then what the container writes until it ends or `limit` bytes
        went out. A reader that left raises ConnectionResetError: at the next write, or, for a
        quiet log, at the next poll (no write would notice before the container ends)."""
        uid, container, attempt = instance
        path = self.runtime.log_path(uid, container, attempt)
        limit = options.limit_bytes
        await resp.write(body)
        sent = len(body)
        offset = len(data) - len(data.split(b"\n")[-1])  # resume after the last whole line
        while limit is None or sent < limit:
            chunk = await asyncio.to_thread(_read, path, offset)
            whole = chunk[: chunk.rfind(b"\n") + 1]
            if whole:
                offset += len(whole)
                out = render(parse_log(whole), options.timestamps)
                if limit is not None:
                    out = out[: limit - sent]
                await resp.write(out)
                sent += len(out)
                continue
            current = await asyncio.to_thread(self.runtime.instances, uid, container)
            if not any(i.attempt == attempt and i.running for i in current):
                # Finished: send what the shim wrote last, then end.
                chunk = await asyncio.to_thread(_read, path, offset)
                out = render(
                    parse_log(chunk if chunk.endswith(b"\n") else chunk + b"\n"), options.timestamps
                )
                if limit is not None:
                    out = out[: limit - sent]
                await resp.write(out)
                return
            if request.transport is None or request.transport.is_closing():
                raise ConnectionResetError("the reader closed the connection")
            await asyncio.sleep(FOLLOW_POLL_SECONDS)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _read(path: Path, offset: int = 0) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""
