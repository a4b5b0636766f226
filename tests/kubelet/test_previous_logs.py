"""`previous=true` reads the run the pod's status shows in `lastState.terminated`, as the
kubelet does: while a container runs, the run before it; while it waits in CrashLoopBackOff,
the run that just ended (a waiting container's `lastState` is its latest run)."""

from __future__ import annotations

from typing import Any

from tests.kubelet.conftest import eventually
from tests.kubelet.test_pods import make_pod, raw_pod, shell

COUNTER = (
    'n=$(cat "$TRAINOPS_POD_ROOT/n" 2>/dev/null || echo 0); echo $((n+1)) > "$TRAINOPS_POD_ROOT/n"'
)


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = pod["status"].get("containerStatuses") or [{}]
    return statuses[0]


def test_previous_is_the_run_before_the_one_running(core: Any, namespace: str) -> None:
    script = f'{COUNTER}; echo "run $n"; if [ "$n" -lt 2 ]; then exit 1; fi; sleep 60'
    make_pod(core, namespace, "third", [shell("main", script)], restartPolicy="OnFailure")
    eventually(
        lambda: (
            "running" in _main(raw_pod(core, namespace, "third")).get("state", {})
            and _main(raw_pod(core, namespace, "third")).get("restartCount") == 2
        )
    )
    assert core.read_namespaced_pod_log("third", namespace, previous=True) == "run 1\n"
    eventually(lambda: core.read_namespaced_pod_log("third", namespace) == "run 2\n")


def test_previous_is_the_run_that_just_ended_while_it_waits_to_restart(
    core: Any, namespace: str
) -> None:
    script = f'{COUNTER}; echo "run $n"; exit 1'
    make_pod(core, namespace, "looping", [shell("main", script)], restartPolicy="OnFailure")

    def consistent_read() -> tuple[int, str] | None:
        before = _main(raw_pod(core, namespace, "looping"))
        if "waiting" not in before.get("state", {}) or before.get("restartCount", 0) < 1:
            return None
        text = core.read_namespaced_pod_log("looping", namespace, previous=True)
        after = _main(raw_pod(core, namespace, "looping"))
        same = after.get("restartCount") == before["restartCount"] and "waiting" in after["state"]
        return (before["restartCount"], text) if same else None

    count, text = eventually(consistent_read, timeout=30)
    assert text == f"run {count}\n"  # the latest run (restartCount n ran run n), not run n-1
