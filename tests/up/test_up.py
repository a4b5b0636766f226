"""`trainops up` end to end: pods survive a restart of `up` (stop or crash) with their logs."""

from __future__ import annotations

import json
import signal
from typing import Any

from tests.up.conftest import Up, eventually, stray_processes

TICKER = {
    "name": "main",
    "image": "busybox",
    "command": ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"],
}


def _pod(core: Any, name: str) -> dict:
    return json.loads(core.read_namespaced_pod(name, "default", _preload_content=False).data)


def _status(core: Any, name: str) -> dict:
    return _pod(core, name)["status"]["containerStatuses"][0]


def test_stopping_and_starting_up_resumes_pods_and_keeps_their_logs(up: Up) -> None:
    up.start()
    core = up.core()
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "ticker"},
            "spec": {"containers": [TICKER], "terminationGracePeriodSeconds": 2},
        },
    )
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "once"},
            "spec": {"restartPolicy": "Never", "containers": [{**TICKER, "name": "once"}]},
        },
    )
    eventually(lambda: "tick 2" in core.read_namespaced_pod_log("ticker", "default"))
    eventually(lambda: "tick 0" in core.read_namespaced_pod_log("once", "default"))
    assert up.stop(signal.SIGTERM) == 0
    assert stray_processes(up.data_dir) == []

    up.start()
    core = up.core()
    # restartPolicy Always: the container stopped with `up` is started again.
    status = eventually(
        lambda: (
            (s := _status(core, "ticker"))["restartCount"] == 1 and "running" in s["state"] and s
        )
    )
    assert status["lastState"]["terminated"]["exitCode"] == 143
    assert "tick 2" in core.read_namespaced_pod_log("ticker", "default", previous=True)
    eventually(lambda: "tick 1" in core.read_namespaced_pod_log("ticker", "default"))
    # restartPolicy Never: the stop ended it for good, as any SIGTERM would have.
    once = _pod(core, "once")
    assert once["status"]["phase"] == "Failed"
    term = once["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["signal"]) == (143, 15)
    assert "tick 0" in core.read_namespaced_pod_log("once", "default")
    assert up.stop() == 0
    assert stray_processes(up.data_dir) == []


def test_after_a_crash_of_up_running_pods_are_adopted_not_restarted(up: Up) -> None:
    up.start()
    core = up.core()
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "ticker"},
            "spec": {"containers": [TICKER], "terminationGracePeriodSeconds": 2},
        },
    )
    eventually(lambda: "running" in _status(core, "ticker")["state"])
    before = _status(core, "ticker")
    up.stop(signal.SIGKILL)  # a crash: pod processes keep running under their shims
    assert stray_processes(up.data_dir)

    up.start()
    core = up.core()
    log = core.read_namespaced_pod_log("ticker", "default")
    count = log.count("tick")
    eventually(lambda: core.read_namespaced_pod_log("ticker", "default").count("tick") > count)
    after = _status(core, "ticker")
    assert (after["restartCount"], after["containerID"]) == (0, before["containerID"])
    assert after["state"] == before["state"]
    assert up.stop() == 0
    assert stray_processes(up.data_dir) == []


def test_a_second_ctrl_c_while_stopping_kills_pods_that_ignore_sigterm(up: Up) -> None:
    up.start()
    core = up.core()
    stubborn = {
        **TICKER,
        "command": ["sh", "-c", "trap 'echo ignored' TERM; while true; do sleep 0.1; done"],
    }
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "stubborn"},
            "spec": {"containers": [stubborn], "terminationGracePeriodSeconds": 300},
        },
    )
    eventually(lambda: "running" in _status(core, "stubborn")["state"])

    def ctrl_c_twice() -> int:
        assert up.proc is not None
        up.proc.send_signal(signal.SIGINT)
        eventually(lambda: any("Ctrl-C again" in line for line in up.output))
        # The shutdown grace (10 s) would end it too; the second Ctrl-C must not wait for it.
        return up.stop(signal.SIGINT, timeout=8)

    assert ctrl_c_twice() == 0
    assert any("stopping now" in line for line in up.output)
    assert stray_processes(up.data_dir) == []

    up.start()
    core = up.core()
    status = eventually(
        lambda: (
            (s := _status(core, "stubborn"))["restartCount"] == 1
            and "terminated" in (s.get("lastState") or {})
            and s
        )
    )
    last = status["lastState"]["terminated"]
    assert (last["exitCode"], last["signal"]) == (137, 9)
    assert ctrl_c_twice() == 0
    assert stray_processes(up.data_dir) == []
