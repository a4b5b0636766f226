"""Pod status is what a real kubelet reports for the same container history."""

from __future__ import annotations

import pytest

from localcluster.kubelet.model import ContainerView, Instance
from localcluster.kubelet.status import compute_phase, pod_status, qos_class

NOW = "2026-01-01T00:01:00Z"
T1, T2 = "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"


def run(attempt: int = 0) -> Instance:
    return Instance(attempt, f"trainops://{attempt}", T1)


def exited(code: int, attempt: int = 0, signal: int | None = None) -> Instance:
    return Instance(attempt, f"trainops://{attempt}", T1, T2, code, signal)


def view(
    *instances: Instance,
    name: str = "main",
    waiting: str = "",
    message: str = "",
    ready: bool | None = None,
) -> ContainerView:
    return ContainerView(name, "busybox", tuple(instances), waiting, message, ready=ready)


def pod(policy: str = "Always", init: int = 0, status: dict | None = None) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "restartPolicy": policy,
            "containers": [{"name": "main", "image": "busybox"}],
            "initContainers": [{"name": f"init{i}", "image": "busybox"} for i in range(init)],
        },
        "status": status or {},
    }


PHASES = {
    "not started is Pending": ("Never", [], [view()], "Pending"),
    "running is Running": ("Never", [], [view(run())], "Running"),
    "exit 0 under Never is Succeeded": ("Never", [], [view(exited(0))], "Succeeded"),
    "exit 0 under OnFailure is Succeeded": ("OnFailure", [], [view(exited(0))], "Succeeded"),
    "exit 1 under Never is Failed": ("Never", [], [view(exited(1))], "Failed"),
    "exit 1 under OnFailure restarting is Running": (
        "OnFailure",
        [],
        [view(exited(1), waiting="CrashLoopBackOff")],
        "Running",
    ),
    "exit 0 under Always is Running": ("Always", [], [view(exited(0))], "Running"),
    "one running one failed under Never is Running": (
        "Never",
        [],
        [view(run()), view(exited(1), name="b")],
        "Running",
    ),
    "init running is Pending": ("Never", [view(run(), name="init0")], [view()], "Pending"),
    "init failed under Never is Failed": (
        "Never",
        [view(exited(1), name="init0")],
        [view()],
        "Failed",
    ),
    "init failed under OnFailure is Pending": (
        "OnFailure",
        [view(exited(1), name="init0", waiting="CrashLoopBackOff")],
        [view()],
        "Pending",
    ),
    "config error is Pending": (
        "Never",
        [],
        [view(waiting="CreateContainerConfigError")],
        "Pending",
    ),
}


@pytest.mark.parametrize(("policy", "init", "views", "want"), PHASES.values(), ids=PHASES.keys())
def test_phase_follows_containers_and_restart_policy(policy, init, views, want) -> None:
    p = pod(policy, init=len(init))
    p["spec"]["containers"] = [{"name": v.name, "image": "busybox"} for v in views]
    assert pod_status(p, init, views, now=NOW)["phase"] == want


def test_a_running_container_reports_running_with_last_state_of_the_previous_instance() -> None:
    status = pod_status(pod(), [], [view(exited(137, 0, signal=9), run(1))], now=NOW)
    (cs,) = status["containerStatuses"]
    assert cs["state"] == {"running": {"startedAt": T1}}
    assert cs["lastState"] == {
        "terminated": {
            "exitCode": 137,
            "reason": "Error",
            "signal": 9,
            "startedAt": T1,
            "finishedAt": T2,
            "containerID": "trainops://0",
        }
    }
    assert (cs["restartCount"], cs["ready"], cs["started"], cs["containerID"]) == (
        1,
        True,
        True,
        "trainops://1",
    )
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c["status"] == "True" for c in status["conditions"])
    assert status["podIP"] == status["hostIP"] == "127.0.0.1"
    assert status["podIPs"] == [{"ip": "127.0.0.1"}]
    assert status["qosClass"] == "BestEffort"


def test_crash_loop_back_off_waits_with_the_last_exit_as_last_state() -> None:
    msg = "back-off 10s restarting failed container=main pod=p_ns(u)"
    status = pod_status(
        pod(), [], [view(exited(1), waiting="CrashLoopBackOff", message=msg)], now=NOW
    )
    (cs,) = status["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": msg}}
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["restartCount"] == 0 and cs["ready"] is False
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [main]",
    )


def test_a_completed_pod_reports_completed_reasons() -> None:
    status = pod_status(pod("Never"), [], [view(exited(0))], now=NOW)
    (cs,) = status["containerStatuses"]
    assert cs["state"]["terminated"]["reason"] == "Completed"
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Ready"]["reason"] == "PodCompleted" and conds["Ready"]["status"] == "False"
    assert conds["PodReadyToStartContainers"]["status"] == "False"


def test_init_containers_hold_the_others_in_pod_initializing() -> None:
    status = pod_status(
        pod("Never", init=2),
        [view(exited(0), name="init0"), view(run(), name="init1")],
        [view()],
        now=NOW,
    )
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    init = {c["type"]: c for c in status["conditions"]}["Initialized"]
    assert init["message"] == "containers with incomplete status: [init1]"


def test_transition_times_move_only_when_a_condition_flips() -> None:
    first = pod_status(pod(), [], [view(run())], now=T1)
    second = pod_status(pod(status=first), [], [view(run())], now=NOW)
    assert {c["lastTransitionTime"] for c in second["conditions"]} == {T1}
    assert second["startTime"] == T1
    third = pod_status(
        pod(status=second), [], [view(exited(1), waiting="CrashLoopBackOff")], now=NOW
    )
    ready = next(c for c in third["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == NOW


def test_a_terminal_phase_never_changes() -> None:
    status = pod_status(pod("Always", status={"phase": "Failed"}), [], [view(run())], now=NOW)
    assert status["phase"] == "Failed"


def test_deleted_pods_end_in_a_terminal_phase() -> None:
    ok = pod_status(pod(), [], [view(exited(0))], now=NOW, terminating_done=True)
    killed = pod_status(pod(), [], [view(exited(143, signal=15))], now=NOW, terminating_done=True)
    assert (ok["phase"], killed["phase"]) == ("Succeeded", "Failed")


def test_compute_phase_counts_a_waiting_container_as_pending() -> None:
    assert compute_phase("Always", [], [{"state": {"waiting": {}}, "lastState": {}}]) == "Pending"


QOS = {
    "no resources": ([{}], "BestEffort"),
    "limits equal requests": (
        [{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}}],
        "Guaranteed",
    ),
    "limits only (requests default to limits)": (
        [{"limits": {"cpu": "1", "memory": "1Gi"}}],
        "Guaranteed",
    ),
    "requests only": ([{"requests": {"cpu": "1"}}], "Burstable"),
    "one guaranteed one best effort": (
        [{"limits": {"cpu": "1", "memory": "1Gi"}}, {}],
        "Burstable",
    ),
}


@pytest.mark.parametrize(("resources", "want"), QOS.values(), ids=QOS.keys())
def test_qos_class(resources: list[dict], want: str) -> None:
    spec = {"containers": [{"name": str(i), "resources": r} for i, r in enumerate(resources)]}
    assert qos_class(spec) == want


def test_a_completed_init_container_reports_ready() -> None:
    status = pod_status(
        pod("Never", init=1), [view(exited(0), name="init0")], [view(run())], now=NOW
    )
    (init,) = status["initContainerStatuses"]
    assert (init["ready"], init["started"]) == (True, False)


def test_a_pod_failed_by_the_kubelet_reports_reason_and_message() -> None:
    failure = ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
    status = pod_status(pod(), [], [view(exited(143, signal=15))], now=NOW, failure=failure)
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", *failure)
    again = pod_status(pod(status=status), [], [view(exited(143, signal=15))], now=NOW)
    assert again["reason"] == "DeadlineExceeded"


def sidecar_pod(policy: str = "Never") -> dict:
    p = pod(policy, init=1)
    p["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    return p


SIDECAR_PHASES = {
    "a starting sidecar keeps the pod Pending": (view(name="init0"), view(), "Pending"),
    "a running sidecar lets the pod run": (view(run(), name="init0"), view(run()), "Running"),
    "a running sidecar keeps a finished pod Running until it stops": (
        view(run(), name="init0"),
        view(exited(0)),
        "Running",
    ),
    "a stopped sidecar's exit code does not decide": (
        view(exited(143, signal=15), name="init0"),
        view(exited(0)),
        "Succeeded",
    ),
}


@pytest.mark.parametrize(
    ("sidecar", "main", "want"), SIDECAR_PHASES.values(), ids=SIDECAR_PHASES.keys()
)
def test_sidecar_phases(sidecar: ContainerView, main: ContainerView, want: str) -> None:
    assert pod_status(sidecar_pod(), [sidecar], [main], now=NOW)["phase"] == want


def test_a_started_sidecar_counts_as_initialized_and_for_readiness() -> None:
    status = pod_status(sidecar_pod(), [view(run(), name="init0")], [view(run())], now=NOW)
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    assert conds["Initialized"] == conds["Ready"] == "True"
    (side,) = status["initContainerStatuses"]
    assert (side["ready"], side["started"]) == (True, True)
    unready = pod_status(
        sidecar_pod(), [view(run(), name="init0", ready=False)], [view(run())], now=NOW
    )
    ready = next(c for c in unready["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "containers with unready status: [init0]"


def test_a_pod_ended_by_a_node_shutdown_is_marked_as_a_disruption() -> None:
    """As a kubelet's graceful node shutdown: DisruptionTarget (TerminationByKubelet) and,
    once terminal, reason Terminated; a later report keeps both."""
    status = pod_status(pod("Never"), [], [view(exited(143, signal=15))], now=NOW, shutdown=True)
    assert (status["phase"], status["reason"]) == ("Failed", "Terminated")
    assert status["message"] == "Pod was terminated in response to imminent node shutdown."
    (disruption,) = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
    assert (disruption["status"], disruption["reason"]) == ("True", "TerminationByKubelet")
    again = pod_status(pod("Never", status=status), [], [view(exited(143, signal=15))], now=NOW)
    assert again["reason"] == "Terminated"
    assert [c for c in again["conditions"] if c["type"] == "DisruptionTarget"] == [disruption]


def test_a_pod_that_finished_before_the_shutdown_is_not_a_disruption() -> None:
    done = pod_status(pod("Never"), [], [view(exited(0))], now=NOW)
    after = pod_status(pod("Never", status=done), [], [view(exited(0))], now=NOW, shutdown=True)
    assert after["phase"] == "Succeeded"
    assert "reason" not in after
    assert "DisruptionTarget" not in [c["type"] for c in after["conditions"]]


POD_IPS = {
    "the pod's own address": ("10.244.3.2", {}, "10.244.3.2"),
    "none before its network is set up": ("", {}, None),
    "kept when not set up again (a completed pod after a restart)": (
        "",
        {"podIP": "10.244.3.2", "podIPs": [{"ip": "10.244.3.2"}]},
        "10.244.3.2",
    ),
    "a new address replaces the old": ("10.244.3.7", {"podIP": "10.244.3.2"}, "10.244.3.7"),
}


@pytest.mark.parametrize(("pod_ip", "old", "expected"), POD_IPS.values(), ids=POD_IPS.keys())
def test_the_pod_ip_is_reported_once_known(pod_ip, old, expected) -> None:
    status = pod_status(pod("Never", status=old), [], [view(run())], now=T2, pod_ip=pod_ip)
    assert status.get("podIP") == expected
    assert status.get("podIPs") == ([{"ip": expected}] if expected else None)
    assert status["hostIP"] == "127.0.0.1"
