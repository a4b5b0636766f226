"""The process runtime: starts container processes through the shim and reads their records.

Layout of one pod under `DATA_DIR/pods/<uid>/`:

    pod.json                          namespace, name, uid (to find logs and orphans)
    root/                             the pod's root: mount links, workingDirs, tmp/
    volumes/<volume>/                 emptyDir, configMap and secret volumes
    containers/<name>/<attempt>/      one instance: meta.json, spec.json, shim.json, pid.json,
                                      exit.json, shim.err
    logs/<name>/<attempt>.log         CRI-format log of that instance (kept for `previous`)

`pods/` and each pod's directories are 0700 and every record and log 0600 (the specs hold the
containers' environment, Secret values included): other local users read none of it.

Everything the kubelet needs to know about an instance is on disk, so a new kubelet process
sees exactly what the old one saw: an instance with `exit.json` has finished; one whose shim is
alive (same pid and same process start time, which rules out pid reuse) is running; one whose
shim vanished without an exit record is lost (reported as `ContainerStatusUnknown`, exit 137,
after killing whatever is left of its process group). An instance this runtime is starting has
its records before its shim has a pid: it counts as running (not yet signalable) meanwhile, since
reads come from elsewhere too (the log server, asked by the API server as soon as the pod is bound).

Disk reads are small and run in a worker thread (`asyncio.to_thread`), never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.client.clock import seconds_precision
from localcluster.kubelet import shim
from localcluster.kubelet.model import Instance

__all__ = ["Runtime", "StartSpec"]

LOST_MESSAGE = "The container could not be located when the pod was terminated"


@dataclass(frozen=True)
class StartSpec:
    uid: str
    container: str
    attempt: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    termination_path: str = ""  # where the process may write its termination message
    termination_policy: str = "File"  # or FallbackToLogsOnError
    # The pod's namespaces to enter (netns path, hosts file, hostname); None: the host's.
    sandbox: dict[str, str] | None = None


def exec_problem(spec: StartSpec) -> str:
    """What the shim's exec of `spec.argv[0]` will fail with ("" when it will start), worded
    as the shim records it (`exec: "x": executable file not found in $PATH`).

    The shim reports a failed exec only after the kubelet has moved on; knowing it up front
    lets the kubelet emit the `Failed` event a real kubelet does instead of `Started`. It
    resolves the name as exec does: through the container's PATH, or relative to its cwd.
    """
    prog = spec.argv[0] if spec.argv else ""
    if not prog:
        return 'exec: "": executable file not found in $PATH'
    if "/" in prog:
        path = os.path.join(spec.cwd, prog)
        if not os.path.exists(path):
            return f'exec: "{prog}": executable file not found in $PATH'
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            return f'exec: "{prog}": Permission denied'
        return ""
    if shutil.which(prog, path=spec.env.get("PATH", os.defpath)) is None:
        return f'exec: "{prog}": executable file not found in $PATH'
    return ""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _alive(record: dict[str, Any] | None) -> bool:
    """The process of a pid record still exists and is the same process (not a reused pid).

    On Linux the start time in /proc/<pid>/stat tells a reused pid apart; elsewhere (macOS has no
    /proc) only existence can be checked.
    """
    if not record or not isinstance(record.get("pid"), int):
        return False
    pid = record["pid"]
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        if _HAS_PROC:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] == b"Z":  # exited, not yet reaped
        return False
    return record.get("start") is None or int(fields[19]) == record["start"]


_HAS_PROC = Path("/proc/self/stat").exists()


class Runtime:
    """Starts, signals and inspects container instances under `data_dir/pods`."""

    def __init__(self, data_dir: Path, *, on_exit: Callable[[str], None] | None = None) -> None:
        self.data_dir = data_dir
        self.pods_dir = data_dir / "pods"
        # Owner-only: instance specs hold the containers' environment, Secret values included.
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.pods_dir, 0o700)
        self._on_exit = on_exit or (lambda uid: None)
        # One task per shim this runtime started, waiting for it to exit: (uid, container, attempt).
        self._watchers: dict[asyncio.Task[None], tuple[str, str, int]] = {}
        self._starting: set[Path] = set()  # instance directories whose shim has no record yet

    # -- paths ---------------------------------------------------------------------------
    def pod_dir(self, uid: str) -> Path:
        return self.pods_dir / uid

    def instance_dir(self, uid: str, container: str, attempt: int) -> Path:
        return self.pod_dir(uid) / "containers" / container / str(attempt)

    def log_path(self, uid: str, container: str, attempt: int) -> Path:
        return self.pod_dir(uid) / "logs" / container / f"{attempt}.log"

    # -- pod records ---------------------------------------------------------------------
    def record_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        path = self.pod_dir(meta["uid"])
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not (path / "pod.json").exists():
            shim.write_json(
                str(path / "pod.json"),
                {"namespace": meta.get("namespace"), "name": meta["name"], "uid": meta["uid"]},
            )

    def known_pods(self) -> list[dict[str, Any]]:
        out = []
        for child in sorted(self.pods_dir.iterdir()) if self.pods_dir.exists() else []:
            rec = _read_json(child / "pod.json")
            if rec:
                out.append(rec)
        return out

    def remove_pod(self, uid: str) -> None:
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)

    # -- instances -----------------------------------------------------------------------
    def instances(self, uid: str, container: str) -> list[Instance]:
        base = self.pod_dir(uid) / "containers" / container
        if not base.exists():
            return []
        attempts = sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())
        out = [self._instance(base / str(a), a) for a in attempts]
        return [i for i in out if i is not None]

    def _instance(self, path: Path, attempt: int) -> Instance | None:
        meta = _read_json(path / "meta.json")
        if meta is None:
            return None
        cid = meta["containerID"]
        started = meta["startedAt"]
        # Checked before shim.json: `start` records the shim, then stops counting it as starting.
        starting = path in self._starting
        ext = _read_json(path / "exit.json")
        if ext is None:
            if starting or _alive(_read_json(path / "shim.json")):
                pid = _read_json(path / "pid.json")
                return Instance(
                    attempt, cid, seconds_precision((pid or {}).get("startedAt") or started)
                )
            # The shim may have written its record just before it exited: look again.
            ext = _read_json(path / "exit.json") or self._record_lost(path, started)
        code = int(ext.get("exitCode", 0))
        return Instance(
            attempt,
            cid,
            seconds_precision(ext.get("startedAt") or started),
            seconds_precision(ext.get("finishedAt") or started),
            code,
            ext.get("signal"),
            ext.get("reason") or ("Completed" if code == 0 else "Error"),
            ext.get("message", ""),
        )

    def _record_lost(self, path: Path, started: str) -> dict[str, Any]:
        """The shim died without recording an exit (killed, or the machine rebooted): kill
        what is left of the container's process group and record the loss once, for good."""
        pid = _read_json(path / "pid.json")
        if _alive(pid):
            assert pid is not None
            _killpg(pid["pid"], signal.SIGKILL)
        record = {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": LOST_MESSAGE,
            "startedAt": (pid or {}).get("startedAt") or started,
            "finishedAt": shim.now_rfc3339_nano(),
        }
        shim.write_json(str(path / "exit.json"), record)
        return record

    def prune(self, uid: str, container: str, keep_from: int) -> None:
        """Forget finished instances older than `keep_from` (their records and logs), as the
        kubelet keeps only the last dead container: `previous` needs one, not a history."""
        base = self.pod_dir(uid) / "containers" / container
        if not base.exists():
            return
        for p in base.iterdir():
            if p.name.isdigit() and int(p.name) < keep_from:
                shutil.rmtree(p, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    self.log_path(uid, container, int(p.name)).unlink()

    def start_spec(self, uid: str, container: str, attempt: int) -> dict[str, Any] | None:
        """What an instance was started with (argv, env, cwd), also for adopted instances."""
        return _read_json(self.instance_dir(uid, container, attempt) / "spec.json")

    def running_instances(self, uid: str) -> list[tuple[str, int]]:
        base = self.pod_dir(uid) / "containers"
        out = []
        if base.exists():
            for cdir in base.iterdir():
                for inst in self.instances(uid, cdir.name):
                    if inst.running:
                        out.append((cdir.name, inst.attempt))
        return out

    async def start(self, spec: StartSpec, *, now: str) -> None:
        """Start one instance through the shim; returns once the shim is recorded."""
        path = self.instance_dir(spec.uid, spec.container, spec.attempt)
        log = self.log_path(spec.uid, spec.container, spec.attempt)
        self._starting.add(path)
        try:
            await asyncio.to_thread(self._prepare, path, log, spec, now)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                shim.__file__,
                str(path / "spec.json"),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                # Inherited by the shim, which keeps it open.
                stderr=open(path / "shim.err", "ab", opener=shim.private),  # noqa: SIM115
                start_new_session=True,
            )
            task = asyncio.create_task(self._reap(proc, spec.uid))
            self._watchers[task] = (spec.uid, spec.container, spec.attempt)
            task.add_done_callback(self._unwatch)
            await asyncio.to_thread(
                shim.write_json,
                str(path / "shim.json"),
                {"pid": proc.pid, "start": shim.proc_start_ticks(proc.pid)},
            )
        finally:
            self._starting.discard(path)

    def _unwatch(self, task: asyncio.Task[None]) -> None:
        self._watchers.pop(task, None)

    def _prepare(self, path: Path, log: Path, spec: StartSpec, now: str) -> None:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        cid = "trainops://" + uuid.uuid4().hex + uuid.uuid4().hex
        shim.write_json(str(path / "meta.json"), {"containerID": cid, "startedAt": now})
        shim.write_json(
            str(path / "spec.json"),
            {
                "started_at": now,
                "argv": spec.argv,
                "env": spec.env,
                "cwd": spec.cwd,
                "log": str(log),
                "state_dir": str(path),
                "termination_path": spec.termination_path,
                "termination_policy": spec.termination_policy,
                "sandbox": spec.sandbox,
            },
        )

    async def _reap(self, proc: asyncio.subprocess.Process, uid: str) -> None:
        await proc.wait()
        self._on_exit(uid)

    async def wait_watchers(self, timeout: float | None = None) -> list[tuple[str, str, int]]:
        """Wait until every shim this runtime started has exited, at most `timeout` seconds;
        the instances (uid, container, attempt) whose shims still run then."""
        if self._watchers:
            await asyncio.wait(list(self._watchers), timeout=timeout)
        return sorted(v for t, v in self._watchers.items() if not t.done())

    async def signal(self, uid: str, container: str, attempt: int, sig: int) -> bool:
        """Signal the instance's process group; False when it is not (yet) known."""
        path = self.instance_dir(uid, container, attempt)
        pid = await asyncio.to_thread(_read_json, path / "pid.json")
        if not pid or not await asyncio.to_thread(_alive, pid):
            return False
        _killpg(pid["pid"], sig)
        return True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
