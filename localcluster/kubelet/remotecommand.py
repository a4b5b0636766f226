"""The remote-command stream protocol of `kubectl exec` over WebSockets (pure).

kubectl ≥ 1.30 runs `exec` over a WebSocket whose subprotocol is `v5.channel.k8s.io` (or the
older `v4.channel.k8s.io`). Every binary message starts with one byte naming its channel:
0 stdin (client → server), 1 stdout, 2 stderr, 3 error (the final `metav1.Status` as JSON),
4 resize (`{"Width": w, "Height": h}`, client → server). v5 adds one control message, byte 255
followed by a channel number: the client closed that stream (stdin EOF), which v4 cannot say.

The options arrive as query parameters: the kubelet's own names (`input`, `output`, `error`,
`tty`, with `command` repeated), which kube-apiserver sends, and the `pods/exec` names
(`stdin`, `stdout`, `stderr`) a client sends to an API server. Errors and the exit code are
reported as a kubelet does: `Success`, or `Failure` with reason `NonZeroExitCode` and the code
as the cause `ExitCode` (kubectl exits with that code).

The same channels also travel as SPDY/3.1 streams (`spdy.py`, `execstreams.py`): what
kube-apiserver speaks to kubelets when it translates a client's WebSocket exec.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHANNEL_CLOSE",
    "ERROR",
    "PROTOCOLS",
    "RESIZE",
    "STDERR",
    "STDIN",
    "STDOUT",
    "UPGRADE_REQUIRED",
    "V5",
    "ExecOptions",
    "exit_status",
    "failure",
    "frame",
    "parse_exec_options",
    "parse_frame",
    "parse_resize",
    "success",
]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
PROTOCOLS = (V5, V4)
"""Subprotocols served, preferred first."""

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CHANNEL_CLOSE = 255  # v5: `[255, channel]`, the client closed that channel

UPGRADE_REQUIRED = (
    "exec needs a connection upgrade: a WebSocket (v5.channel.k8s.io or v4.channel.k8s.io) "
    "or SPDY/3.1"
)

# Names of the kubelet's query parameters, and of `pods/exec`'s (PodExecOptions).
_FLAGS = {
    "stdin": ("input", "stdin"),
    "stdout": ("output", "stdout"),
    "stderr": ("error", "stderr"),
}


@dataclass(frozen=True)
class ExecOptions:
    command: tuple[str, ...]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "t", "yes", "y", "")


def parse_exec_options(query: Mapping[str, str], commands: Sequence[str]) -> ExecOptions | str:
    """The options of one exec request (`commands`: every `command` value, in order), or the
    message of a 400 (kubelet wording)."""

    def flag(names: tuple[str, ...]) -> bool:
        return any(n in query and _truthy(query[n]) for n in names)

    stdin, stdout, stderr = (flag(_FLAGS[k]) for k in ("stdin", "stdout", "stderr"))
    tty = flag(("tty",))
    if not commands or not commands[0]:
        return "you must specify a command to run (the command parameter)"
    if not (stdin or stdout or stderr):
        return "you must specify at least 1 of stdin, stdout, stderr"
    if tty and stderr:
        # With a terminal, output and errors share it: kubectl sends stderr=false.
        return "stderr cannot be requested with a tty: both go to the terminal"
    return ExecOptions(tuple(commands), stdin, stdout, stderr, tty)


def frame(channel: int, data: bytes) -> bytes:
    """One WebSocket message of the channel protocol."""
    return bytes((channel,)) + data


def parse_frame(message: bytes) -> tuple[int, bytes] | None:
    """(channel, payload) of a received message; None for an empty one (ignored)."""
    if not message:
        return None
    return message[0], message[1:]


def parse_resize(payload: bytes) -> tuple[int, int] | None:
    """(width, height) of a resize message; None when it is not a usable size."""
    try:
        size = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(size, dict):
        return None
    width, height = size.get("Width"), size.get("Height")
    if not isinstance(width, int) or not isinstance(height, int):
        return None
    if not (0 < width <= 0xFFFF and 0 < height <= 0xFFFF):
        return None
    return width, height


def success() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def failure(message: str, *, reason: str = "", code: int | None = None) -> dict[str, Any]:
    """A `Failure` Status for the error channel (or a kubelet error response with `code`)."""
    status: dict[str, Any] = {"metadata": {}, "status": "Failure", "message": message}
    if reason:
        status["reason"] = reason
    if code is not None:
        status = {"kind": "Status", "apiVersion": "v1", **status, "code": code}
    return status


def exit_status(command: Sequence[str], code: int) -> dict[str, Any]:
    """The status a kubelet sends when the command has exited with `code`."""
    if code == 0:
        return success()
    status = failure(
        f"command terminated with non-zero exit code: error executing command "
        f"[{' '.join(command)}], exit code {code}",
        reason="NonZeroExitCode",
    )
    status["details"] = {"causes": [{"reason": "ExitCode", "message": str(code)}]}
    return status
