"""The process runtime runs containers through the shim and records how they end."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from localcluster.kubelet.logs import LogOptions, select_log
from localcluster.kubelet.runtime import Runtime, StartSpec, exec_problem
from tests.kubelet.conftest import kill_strays

NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _no_strays(tmp_path: Path):
    yield
    kill_strays(tmp_path)


ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def _until(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def _run(rt: Runtime, argv: list[str], *, name: str = "c", env: dict | None = None):
    spec = StartSpec("uid-1", name, 0, argv, {**ENV, **(env or {})}, str(rt.data_dir))
    await rt.start(spec, now=NOW)
    return spec


def _finished(rt: Runtime, name: str = "c"):
    insts = rt.instances("uid-1", name)
    return insts[-1] if insts and not insts[-1].running else None


ENDINGS = {
    "success": (["sh", "-c", "echo out; echo err >&2"], 0, None, "Completed"),
    "failure with a code": (["sh", "-c", "exit 3"], 3, None, "Error"),
    "killed by a signal": (["sh", "-c", "kill -9 $$"], 137, 9, "Error"),
    "missing executable": (["/no/such/binary"], 128, None, "StartError"),
}


@pytest.mark.parametrize(("argv", "code", "sig", "reason"), ENDINGS.values(), ids=ENDINGS.keys())
async def test_exits_are_recorded(tmp_path: Path, argv, code, sig, reason) -> None:
    rt = Runtime(tmp_path)
    await _run(rt, argv)
    inst = await _until(lambda: _finished(rt))
    assert (inst.exit_code, inst.signal, inst.reason) == (code, sig, reason)
    assert inst.container_id.startswith("trainops://") and len(inst.container_id) == 75
    await rt.wait_watchers()


async def test_output_is_logged_per_line_with_stream_and_timestamp(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    await _run(rt, ["sh", "-c", "echo $GREETING; echo oops >&2"], env={"GREETING": "hi"})
    await _until(lambda: _finished(rt))
    raw = rt.log_path("uid-1", "c", 0).read_bytes()
    streams = sorted(line.split(b" ")[1] for line in raw.splitlines())
    assert streams == [b"stderr", b"stdout"]
    assert sorted(select_log(raw, LogOptions()).splitlines()) == [b"hi", b"oops"]


async def test_sigterm_reaches_the_process_group_and_is_recorded(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    script = "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.05; done"
    await _run(rt, ["sh", "-c", script])
    log = rt.log_path("uid-1", "c", 0)
    await _until(lambda: log.exists() and b"ready" in log.read_bytes())
    assert rt.running_instances("uid-1") == [("c", 0)]
    assert await rt.signal("uid-1", "c", 0, signal.SIGTERM)
    inst = await _until(lambda: _finished(rt))
    assert inst.exit_code == 0
    assert b"bye" in log.read_bytes()


async def test_sigkill_reports_137(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    await _run(rt, ["sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"])
    log = rt.log_path("uid-1", "c", 0)
    await _until(lambda: log.exists() and b"ready" in log.read_bytes())
    await rt.signal("uid-1", "c", 0, signal.SIGTERM)
    await asyncio.sleep(0.1)
    assert rt.running_instances("uid-1") == [("c", 0)]
    await rt.signal("uid-1", "c", 0, signal.SIGKILL)
    inst = await _until(lambda: _finished(rt))
    assert (inst.exit_code, inst.signal) == (137, 9)


async def test_a_new_runtime_adopts_a_running_instance_and_sees_its_exit(tmp_path: Path) -> None:
    first = Runtime(tmp_path)
    await _run(
        first, [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(0.5)"]
    )
    log = first.log_path("uid-1", "c", 0)
    await _until(lambda: log.exists() and b"up" in log.read_bytes())
    second = Runtime(tmp_path)  # as after a kubelet restart: not the shim's parent
    assert second.running_instances("uid-1") == [("c", 0)]
    inst = await _until(lambda: _finished(second))
    assert inst.exit_code == 0
    await first.wait_watchers()


async def test_an_instance_whose_shim_vanished_is_lost_and_its_process_killed(
    tmp_path: Path,
) -> None:
    rt = Runtime(tmp_path)
    await _run(rt, ["sh", "-c", "echo ready; sleep 30"])
    log = rt.log_path("uid-1", "c", 0)
    await _until(lambda: log.exists() and b"ready" in log.read_bytes())
    shim_pid = __import__("json").loads(
        (rt.instance_dir("uid-1", "c", 0) / "shim.json").read_text()
    )["pid"]
    child_pid = __import__("json").loads(
        (rt.instance_dir("uid-1", "c", 0) / "pid.json").read_text()
    )["pid"]
    os.kill(shim_pid, signal.SIGKILL)
    await rt.wait_watchers()
    inst = _finished(rt)
    assert inst is not None
    assert (inst.exit_code, inst.reason) == (137, "ContainerStatusUnknown")
    await _until(
        lambda: (
            not Path(f"/proc/{child_pid}").exists()
            or b") Z" in Path(f"/proc/{child_pid}/stat").read_bytes()
        )
    )


async def test_pruning_keeps_only_recent_instances_and_their_logs(tmp_path: Path) -> None:
    rt = Runtime(tmp_path)
    for attempt in range(3):
        await rt.start(StartSpec("uid-1", "c", attempt, ["true"], ENV, str(tmp_path)), now=NOW)
        await _until(lambda n=attempt + 1: _finished(rt) and len(rt.instances("uid-1", "c")) == n)
    rt.prune("uid-1", "c", keep_from=2)
    assert [i.attempt for i in rt.instances("uid-1", "c")] == [2]
    assert not rt.log_path("uid-1", "c", 0).exists()
    assert rt.log_path("uid-1", "c", 2).exists()
    await rt.wait_watchers()


EXEC_PROBLEMS = {
    "a program on the container's PATH": ("sh", ""),
    "a program on no PATH entry": ("no-such-program", "executable file not found in $PATH"),
    "an absolute path that exists": (sys.executable, ""),
    "an absolute path that does not": ("/no/such/bin", "executable file not found in $PATH"),
    "a path relative to the working directory": ("./run.sh", ""),
    "a file that is not executable": ("./data.txt", "Permission denied"),
    "a directory": ("./sub", "Permission denied"),
}


@pytest.mark.parametrize(("program", "problem"), EXEC_PROBLEMS.values(), ids=list(EXEC_PROBLEMS))
def test_exec_problems_are_known_before_the_start_as_the_shim_words_them(
    tmp_path: Path, program: str, problem: str
) -> None:
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "data.txt").write_text("")
    (tmp_path / "sub").mkdir()
    spec = StartSpec("uid", "c", 0, [program], {"PATH": "/usr/bin:/bin"}, str(tmp_path))
    expected = f'exec: "{program}": {problem}' if problem else ""
    assert exec_problem(spec) == expected


async def test_an_instance_read_while_its_shim_is_being_started_is_not_lost(
    tmp_path: Path,
) -> None:
    """Anything may read the instances while one starts: kube-apiserver asks the kubelet for
    `pods/log` as soon as the pod is bound. A read between the instance's first record and its
    shim's must not declare it lost: its process would run on, unknown to every stop."""
    rt = Runtime(tmp_path)
    start = asyncio.create_task(_run(rt, ["sh", "-c", "echo up; sleep 30"]))
    path = rt.instance_dir("uid-1", "c", 0)
    reads_between = []
    while not start.done():  # one read per turn of the event loop, as the log server's are
        recorded = (path / "meta.json").exists()
        read = rt.instances("uid-1", "c")
        if recorded and not (path / "shim.json").exists():
            reads_between.append([(i.running, i.reason) for i in read])
        await asyncio.sleep(0)
    await start
    assert reads_between, "no read fell between the instance's records"
    assert all(r == [(True, "")] for r in reads_between)
    assert rt.running_instances("uid-1") == [("c", 0)]
    deadline = time.monotonic() + 10
    while not await rt.signal("uid-1", "c", 0, signal.SIGTERM):  # no pid until the shim runs it
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    inst = await _until(lambda: _finished(rt))
    assert (inst.exit_code, inst.signal, inst.reason) == (143, 15, "Error")
    assert await rt.wait_watchers(timeout=10) == []


async def test_waiting_for_shims_is_bounded_and_names_those_still_running(
    tmp_path: Path,
) -> None:
    rt = Runtime(tmp_path)
    await _run(rt, ["sh", "-c", "sleep 30"])
    assert await rt.wait_watchers(timeout=0.2) == [("uid-1", "c", 0)]
    await _until(lambda: (rt.instance_dir("uid-1", "c", 0) / "pid.json").exists())
    assert await rt.signal("uid-1", "c", 0, signal.SIGKILL)
    assert await rt.wait_watchers(timeout=10) == []
