"""`kubectl port-forward` driven from tests: a pod-side echo server and a forwarding session."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

__all__ = ["ECHO_SERVER", "echo_through", "forwarding", "free_port"]

# Upper-cases what it receives: an answer proves the bytes went through the pod's server.
ECHO_SERVER = """
import os, socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"])))
s.listen()
def serve(c):
    with c:
        while data := c.recv(65536):
            c.sendall(data.upper())
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def forwarding(
    argv: Sequence[str], timeout: float = 30.0, env: Mapping[str, str] | None = None
) -> Iterator[tuple[int, list[str]]]:
    """Run `kubectl ... port-forward ... :PORT` (with `env`, else ours); yields (the local
    port, its output lines so far and to come), stops it at the end."""
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=None if env is None else dict(env),
    )
    lines: list[str] = []
    found = threading.Event()
    port: list[int] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) ->", line)
            if m and not port:
                port.append(int(m.group(1)))
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert found.wait(timeout) and port, f"port-forward did not start: {''.join(lines)}"
        yield port[0], lines
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def echo_through(port: int, payload: bytes, timeout: float = 15.0) -> bytes:
    """Send `payload` to 127.0.0.1:`port`, half-close, read the whole answer."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        chunks = []
        while time.monotonic() < deadline:
            data = c.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)
