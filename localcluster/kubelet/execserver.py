"""The kubelet's `/exec/{namespace}/{pod}/{container}`: `kubectl exec` into a running container.

Served next to the logs on the kubelet's HTTPS port (`logserver.py`: only clients with the API
server's kubelet client certificate get in). The request is a WebSocket upgrade speaking the
channel protocol of `remotecommand.py`; each request runs exactly one command, as a child of
the kubelet in a session of its own, through `shim.py session`:

- in the container's environment and working directory, as the kubelet computed them when it
  started the running instance (its `spec.json`, the same source exec probes use);
- with a pod network, inside the pod's namespaces (network, a mount namespace with the pod's
  hosts file on /etc/hosts, UTS with the pod's hostname), entered as the container's shim does;
- with `tty`, on a pseudo-terminal that is its controlling terminal; resize messages set the
  terminal's size.

Bounds: at most `max_sessions` at once (429 beyond), messages from the client up to 1 MiB,
output sent in pieces of at most 32 KiB, and a session ends after `idle_timeout` seconds
without traffic either way (the kubelet's `--streaming-connection-idle-timeout`, 4 h). The
command's process group is killed when it exits (leftovers), when the client goes away, when
the container instance it runs beside stops, or at the idle timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import struct
import sys
import termios
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from localcluster.kubelet import execstreams, shim
from localcluster.kubelet import remotecommand as rc
from localcluster.kubelet.runtime import Runtime

__all__ = ["ExecServer"]

log = logging.getLogger("trainops.kubelet")

MAX_MESSAGE = 1024 * 1024
CHUNK = 32 * 1024
IDLE_TIMEOUT = 4 * 3600.0
MAX_SESSIONS = 64
WATCH_SECONDS = 0.5  # how often a session checks its container and the idle timeout
DRAIN_SECONDS = 2.0  # output still sent after the command exited


def _response(code: int, reason: str, message: str) -> web.Response:
    body = rc.failure(message, reason=reason, code=code)
    return web.Response(status=code, text=json.dumps(body), content_type="application/json")


class ExecServer:
    """Runs exec sessions for the pods `lookup(ns, name)` knows (it gives the pod uid)."""

    def __init__(
        self,
        runtime: Runtime,
        lookup: Callable[[str, str], str | None],
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.runtime = runtime
        self.lookup = lookup
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self.sessions = 0

    def add_routes(self, app: web.Application) -> None:
        path = "/exec/{namespace}/{pod}/{container}"
        app.router.add_get(path, self._exec)
        app.router.add_post(path, self._exec)

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        options = rc.parse_exec_options(request.query, request.query.getall("command", []))
        if isinstance(options, str):
            return _response(400, "BadRequest", options)
        uid = self.lookup(ns, pod)
        if uid is None:
            return _response(404, "NotFound", f'pods "{pod}" not found')
        instances = await asyncio.to_thread(self.runtime.instances, uid, container)
        if not instances or not instances[-1].running:
            return _response(
                400, "BadRequest", f'container "{container}" in pod "{pod}" is not running'
            )
        attempt = instances[-1].attempt
        spec = await asyncio.to_thread(self.runtime.start_spec, uid, container, attempt)
        if spec is None:
            return _response(500, "InternalError", f'container "{container}" has no start record')
        if self.sessions >= self.max_sessions:
            return _response(
                429, "TooManyRequests", f"too many exec sessions on this node ({self.sessions})"
            )
        sandbox = str(self.runtime.pod_dir(uid) / "sandbox.json") if spec.get("sandbox") else "-"
        argv = [sys.executable, "-I", "-S", shim.__file__, "session", sandbox]
        argv += ["1" if options.tty else "0", *options.command]
        alive = _InstanceCheck(self.runtime, uid, container, attempt)
        env, cwd = spec.get("env") or {}, str(spec.get("cwd") or "/")
        self.sessions += 1
        try:
            upgrade = request.headers.get("Upgrade", "").lower()
            if upgrade.startswith("spdy/"):
                protocol = execstreams.spdy_protocol(request)
                if protocol is None:
                    return _response(
                        400,
                        "BadRequest",
                        "unsupported stream protocol: want one of "
                        + ", ".join(execstreams.SPDY_PROTOCOLS),
                    )
                spdy_channels = execstreams.SpdyChannels(request, options)
                response, streams_open = await spdy_channels.start(protocol)
                if streams_open:
                    await _Session(spdy_channels, options, self.idle_timeout).run(
                        argv, env, cwd, alive
                    )
                return response
            ws = web.WebSocketResponse(protocols=rc.PROTOCOLS, max_msg_size=MAX_MESSAGE)
            ready = ws.can_prepare(request)
            if not ready.ok:
                return _response(400, "BadRequest", rc.UPGRADE_REQUIRED)
            if ready.protocol is None:
                return _response(
                    400,
                    "BadRequest",
                    f"unsupported WebSocket subprotocol: want one of {', '.join(rc.PROTOCOLS)}",
                )
            await ws.prepare(request)
            channels = execstreams.WebSocketChannels(ws)
            await _Session(channels, options, self.idle_timeout).run(argv, env, cwd, alive)
            return ws
        finally:
            self.sessions -= 1


class _InstanceCheck:
    """Whether the container instance the session runs beside is still running."""

    def __init__(self, runtime: Runtime, uid: str, container: str, attempt: int) -> None:
        self.runtime, self.uid, self.container, self.attempt = runtime, uid, container, attempt

    async def __call__(self) -> bool:
        current = await asyncio.to_thread(self.runtime.instances, self.uid, self.container)
        return any(i.attempt == self.attempt and i.running for i in current)


class _Session:
    def __init__(
        self, channels: execstreams.Channels, options: rc.ExecOptions, idle_timeout: float
    ) -> None:
        self.channels = channels
        self.options = options
        self.idle_timeout = idle_timeout
        self.last_traffic = time.monotonic()
        self.send_lock = asyncio.Lock()
        self.master: int | None = None  # the terminal's master side (tty)

    async def send(self, channel: int, data: bytes) -> None:
        self.last_traffic = time.monotonic()
        async with self.send_lock:
            await self.channels.send(channel, data)

    async def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        alive: Callable[[], Awaitable[bool]],
    ) -> None:
        try:
            proc = await self._start(argv, env, cwd)
        except OSError as e:  # e.g. the working directory is gone
            await self._finish(rc.failure(f"starting {self.options.command[0]!r}: {e.strerror}"))
            await self.channels.close()
            return
        outputs = self._outputs(proc)
        pump_in = asyncio.create_task(self._input(proc))
        watch = asyncio.create_task(self._watch(alive))
        waited = asyncio.create_task(proc.wait())
        try:
            done, _ = await asyncio.wait(
                {pump_in, watch, waited}, return_when=asyncio.FIRST_COMPLETED
            )
            _killpg(proc.pid)  # the command's leftovers, or the whole command
            code = await proc.wait()
            if waited in done:
                # Everything the command wrote is in the pipes: send it, then the status.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(DRAIN_SECONDS):
                        await asyncio.gather(*outputs, return_exceptions=True)
                exit_code = 128 - code if code < 0 else code
                await self._finish(rc.exit_status(self.options.command, exit_code))
            elif watch in done and watch.result():
                await self._finish(rc.failure(watch.result()))
        finally:
            for task in (pump_in, watch, waited, *outputs):
                task.cancel()
            _killpg(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            if self.master is not None:
                os.close(self.master)
                self.master = None
            await self.channels.close()

    async def _start(
        self, argv: list[str], env: dict[str, str], cwd: str
    ) -> asyncio.subprocess.Process:
        o = self.options
        pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        if not o.tty:
            return await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=cwd,
                stdin=pipe if o.stdin else null,
                stdout=pipe if o.stdout else null,
                stderr=pipe if o.stderr else null,
                start_new_session=True,
            )
        master, slave = os.openpty()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                cwd=cwd,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
            )
        except OSError:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.master = master
        return proc

    def _outputs(self, proc: asyncio.subprocess.Process) -> list[asyncio.Task[None]]:
        if self.master is not None:
            return [asyncio.create_task(self._terminal_output())] if self.options.stdout else []
        out = []
        if proc.stdout is not None:
            out.append(asyncio.create_task(self._pump(proc.stdout, rc.STDOUT)))
        if proc.stderr is not None:
            out.append(asyncio.create_task(self._pump(proc.stderr, rc.STDERR)))
        return out

    async def _pump(self, stream: asyncio.StreamReader, channel: int) -> None:
        while data := await stream.read(CHUNK):
            await self.send(channel, data)

    async def _terminal_output(self) -> None:
        assert self.master is not None
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(self.master, readable.set)
        try:
            while True:
                await readable.wait()
                readable.clear()
                try:
                    data = os.read(self.master, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: every holder of the terminal's other side is gone
                    return
                if not data:
                    return
                await self.send(rc.STDOUT, data)
        finally:
            loop.remove_reader(self.master)

    async def _input(self, proc: asyncio.subprocess.Process) -> None:
        """Client messages until the client closes: stdin, resize, v5 close-stdin."""
        async for channel, payload in self.channels.incoming():
            self.last_traffic = time.monotonic()
            if channel == rc.STDIN and self.options.stdin:
                await self._write_stdin(proc, payload)
            elif channel == rc.RESIZE and self.master is not None:
                size = rc.parse_resize(payload)
                if size is not None:
                    _set_size(self.master, *size)
            elif channel == rc.CHANNEL_CLOSE and payload[:1] == bytes((rc.STDIN,)):
                self._close_stdin(proc)

    async def _write_stdin(self, proc: asyncio.subprocess.Process, data: bytes) -> None:
        if self.master is not None:
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(self.master, view) :]
                except BlockingIOError:
                    await asyncio.sleep(0.01)  # the terminal's input buffer is full
            return
        if proc.stdin is None or proc.stdin.is_closing():
            return
        try:
            proc.stdin.write(data)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command stopped reading; its exit ends the session

    def _close_stdin(self, proc: asyncio.subprocess.Process) -> None:
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.write(self.master, b"\x04")  # EOF at the start of a line
        elif proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()

    async def _watch(self, alive: Callable[[], Awaitable[bool]]) -> str:
        """Returns why the session must end ("" never: it runs until cancelled)."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if time.monotonic() - self.last_traffic > self.idle_timeout:
                return f"exec session idle for more than {self.idle_timeout:g}s"
            if not await alive():
                return "the container stopped"

    async def _finish(self, status: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send(rc.ERROR, json.dumps(status).encode())


def _set_size(master: int, width: int, height: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
