"""The per-container shim: runs one container process and outlives the kubelet.

Like containerd's shim, this small process sits between the kubelet and the container process so
that (1) the container's output is captured with a timestamp per line in the CRI log format
(`<RFC 3339 nano> <stream> <F|P> <text>`), (2) the exit code is recorded in `exit.json` even when
the kubelet is not running, and (3) a restarted kubelet can adopt a running container: it
finds the shim and the process by pid and process start time, and reads the exit record later.

Standard library only, started as `python -I -S shim.py <spec.json>` (fast start-up, no site).
The shim runs in its own session; the container process runs in its own process group (pgid =
its pid), which the kubelet signals (SIGTERM, then SIGKILL). When the main process exits, the
rest of its process group is killed, as the kernel does to a container when its PID 1 exits.

With a pod network (`sandbox` in the spec), the shim first joins the pod's network namespace and
enters a mount and UTS namespace of its own: the kubelet's hosts file of the pod is bind-mounted
on /etc/hosts (mounts private, nothing propagates back to the host) and the hostname set, so
the container process starts inside them. `shim.py exec <sandbox.json> CMD...` does the same and
execs CMD: exec probes and preStop hooks run in the pod's namespaces like the container.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

_MAX_LINE = 16 * 1024  # longer lines are split into partial (P) entries, like CRI runtimes
# Termination messages (kubelet limits): the file is read up to 4096 bytes; the log fallback
# takes the last 80 lines, at most 2048 bytes.
MAX_MESSAGE_FILE = 4096
FALLBACK_LINES = 80
FALLBACK_BYTES = 2048


def termination_message(file_text: bytes, tail: list[bytes], policy: str, code: int) -> str:
    """`terminated.message`: the termination-message file, or with `FallbackToLogsOnError` and
    a failed exit, the end of the log (the kubelet's rules)."""
    if file_text:
        return file_text[:MAX_MESSAGE_FILE].decode("utf-8", errors="replace")
    if policy == "FallbackToLogsOnError" and code != 0 and tail:
        text = b"".join(tail[-FALLBACK_LINES:])
        return text[-FALLBACK_BYTES:].decode("utf-8", errors="replace")
    return ""


# Linux constants (<sched.h>, <sys/mount.h>).
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWNET = 0x40000000
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


def enter_sandbox(sandbox: dict[str, str]) -> None:
    """Join the pod's network namespace (`netns`, a path), then new mount and UTS namespaces:
    `hosts` bind-mounted on /etc/hosts and the hostname set. OSError names the failed step."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, step: str) -> None:
        if result != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{step}: {os.strerror(err)}")

    fd = os.open(sandbox["netns"], os.O_RDONLY)
    try:
        check(libc.setns(fd, _CLONE_NEWNET), f"join network namespace {sandbox['netns']}")
    finally:
        os.close(fd)
    check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWUTS), "unshare mount and UTS namespaces")
    check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
    if sandbox.get("hosts"):
        check(
            libc.mount(sandbox["hosts"].encode(), b"/etc/hosts", None, _MS_BIND, None),
            "bind-mount the pod's hosts file on /etc/hosts",
        )
    if sandbox.get("hostname"):
        socket.sethostname(sandbox["hostname"])


def now_rfc3339_nano() -> str:
    ns = time.time_ns()
    base = datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ns % 1_000_000_000:09d}Z"


def proc_start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[19])


CONTAINER_UMASK = 0o022
"""The container process's umask, as container runtimes set it (the shim's own is `up`'s,
0077: its records and logs hold the container's environment and output)."""


def private(path: str, flags: int) -> int:
    """An `opener` creating files 0600: records and logs are the kubelet user's alone."""
    return os.open(path, flags, 0o600)


def write_json(path: str, value: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", opener=private) as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _pump(
    stream: object, name: bytes, log: object, lock: threading.Lock, tail: collections.deque[bytes]
) -> None:
    while True:
        line = stream.readline(_MAX_LINE)  # type: ignore[attr-defined]
        if not line:
            return
        tail.append(line)
        tag = b"F" if line.endswith(b"\n") else b"P"
        text = line[:-1] if tag == b"F" else line
        entry = now_rfc3339_nano().encode() + b" " + name + b" " + tag + b" " + text + b"\n"
        with lock:
            log.write(entry)  # type: ignore[attr-defined]
            log.flush()  # type: ignore[attr-defined]


def _ignore(signum: int, frame: object) -> None:
    """The shim outlives signals meant for the container: it must record the exit."""


def main(spec_path: str) -> int:
    # A handler, not SIG_IGN: ignored dispositions would be inherited by the container process.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    with open(spec_path) as f:
        spec = json.load(f)
    state = spec["state_dir"]
    log = open(spec["log"], "ab", opener=private)  # noqa: SIM115 - kept open while it runs
    message_path = spec.get("termination_path") or ""
    if message_path:  # a fresh file per instance: an old message must not be reported again
        os.makedirs(os.path.dirname(message_path), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(message_path)
    # One start time for every record of this instance: the kubelet decided it (meta.json), so
    # a status read before and after the shim writes pid.json reports the same startedAt.
    started = spec.get("started_at") or now_rfc3339_nano()
    try:
        if spec.get("sandbox"):
            enter_sandbox(spec["sandbox"])
    except OSError as e:
        write_json(
            os.path.join(state, "exit.json"),
            {
                "exitCode": 128,
                "reason": "StartError",
                "message": f"entering the pod's namespaces: {e.strerror or e}",
                "startedAt": started,
                "finishedAt": now_rfc3339_nano(),
            },
        )
        return 0
    try:
        child = subprocess.Popen(
            spec["argv"],
            env=spec["env"],
            cwd=spec["cwd"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,
            restore_signals=True,
            umask=CONTAINER_UMASK,
        )
    except OSError as e:
        reason = (
            "executable file not found in $PATH" if isinstance(e, FileNotFoundError) else e.strerror
        )
        write_json(
            os.path.join(state, "exit.json"),
            {
                "exitCode": 128,
                "reason": "StartError",
                "message": f'exec: "{spec["argv"][0]}": {reason}',
                "startedAt": started,
                "finishedAt": now_rfc3339_nano(),
            },
        )
        return 0
    write_json(
        os.path.join(state, "pid.json"),
        {"pid": child.pid, "start": proc_start_ticks(child.pid), "startedAt": started},
    )
    lock = threading.Lock()
    tail: collections.deque[bytes] = collections.deque(maxlen=FALLBACK_LINES)
    pumps = [
        threading.Thread(
            target=_pump, args=(child.stdout, b"stdout", log, lock, tail), daemon=True
        ),
        threading.Thread(
            target=_pump, args=(child.stderr, b"stderr", log, lock, tail), daemon=True
        ),
    ]
    for t in pumps:
        t.start()
    code = child.wait()
    finished = now_rfc3339_nano()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # leftovers of the container's process group
    for t in pumps:
        t.join(timeout=2.0)
    exit_code = 128 - code if code < 0 else code
    record: dict[str, object] = {
        "startedAt": started,
        "finishedAt": finished,
        "exitCode": exit_code,
    }
    if code < 0:
        record["signal"] = -code
    file_text = b""
    if message_path:
        with contextlib.suppress(OSError), open(message_path, "rb") as f:
            file_text = f.read(MAX_MESSAGE_FILE)
    policy = spec.get("termination_policy") or "File"
    message = termination_message(file_text, list(tail), policy, exit_code)
    if message:
        record["message"] = message
    write_json(os.path.join(state, "exit.json"), record)
    return 0


def exec_in(sandbox_path: str, argv: list[str]) -> int:
    """Enter the sandbox described in `sandbox_path` and exec `argv` (exit 126/127 on failure,
    as a shell does)."""
    with open(sandbox_path) as f:
        sandbox = json.load(f)
    try:
        enter_sandbox(sandbox)
    except OSError as e:
        print(f"entering the pod's namespaces: {e.strerror or e}", file=sys.stderr)
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"exec {argv[0]!r}: {e.strerror}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # not reached


def session(sandbox_path: str, tty: bool, argv: list[str]) -> int:
    """`kubectl exec`: like `exec_in` (no sandbox when `sandbox_path` is "-"), with the
    container's umask, and with `tty` the terminal on fd 0 made the controlling terminal of
    this new session (the kubelet starts it with `start_new_session`), so job control and
    Ctrl-C reach the command."""
    if tty:
        import fcntl
        import termios

        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        except OSError as e:
            print(f"making the terminal the controlling one: {e.strerror}", file=sys.stderr)
            return 126
    os.umask(CONTAINER_UMASK)
    if sandbox_path == "-":
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"exec {argv[0]!r}: {e.strerror}", file=sys.stderr)
            return 127 if isinstance(e, FileNotFoundError) else 126
    return exec_in(sandbox_path, argv)


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == "session":
        sys.exit(session(sys.argv[2], sys.argv[3] == "1", sys.argv[4:]))
    if len(sys.argv) > 3 and sys.argv[1] == "exec":
        sys.exit(exec_in(sys.argv[2], sys.argv[3:]))
    sys.exit(main(sys.argv[1]))
