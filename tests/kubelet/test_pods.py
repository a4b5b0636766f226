"""Pods run as local processes and report status as a kubelet does (through the API server)."""

from __future__ import annotations

import base64
import ipaddress
import json
import sys
import threading
from pathlib import Path
from typing import Any

from tests.kubelet.conftest import eventually

PY = sys.executable


def make_pod(core: Any, ns: str, name: str, containers: list[dict], **spec: Any) -> dict:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": containers, **spec},
    }
    core.create_namespaced_pod(ns, body)
    return body


def raw_pod(core: Any, ns: str, name: str) -> dict:
    resp = core.read_namespaced_pod(name, ns, _preload_content=False)
    return json.loads(resp.data)


def shell(name: str, script: str, **extra: Any) -> dict:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def phase_is(core: Any, ns: str, name: str, phase: str) -> dict | None:
    pod = raw_pod(core, ns, name)
    return pod if pod.get("status", {}).get("phase") == phase else None


def test_a_pod_that_succeeds_reports_completed_and_its_log(core, namespace) -> None:
    make_pod(
        core, namespace, "ok", [shell("main", "echo hello; echo oops >&2")], restartPolicy="Never"
    )
    pod = eventually(lambda: phase_is(core, namespace, "ok", "Succeeded"))
    (cs,) = pod["status"]["containerStatuses"]
    term = cs["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert cs["containerID"].startswith("trainops://")
    node = core.read_node("trainops")
    if node.spec.pod_cidr:  # a network per pod: an address of the node's pod CIDR
        ip = ipaddress.ip_address(pod["status"]["podIP"])
        assert ip in ipaddress.ip_network(node.spec.pod_cidr)
    else:  # the host's network (no privilege, or no CNI plugins)
        assert pod["status"]["podIP"] == "127.0.0.1"
    assert pod["spec"]["nodeName"] == "trainops"
    conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conds == {
        "PodReadyToStartContainers": "False",
        "Initialized": "True",
        "Ready": "False",
        "ContainersReady": "False",
        "PodScheduled": "True",
    }
    log = core.read_namespaced_pod_log("ok", namespace)
    assert sorted(log.splitlines()) == ["hello", "oops"]


def test_a_failing_pod_reports_its_exit_code(core, namespace) -> None:
    make_pod(core, namespace, "bad", [shell("main", "exit 3")], restartPolicy="Never")
    pod = eventually(lambda: phase_is(core, namespace, "bad", "Failed"))
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (3, "Error")


def test_a_process_killed_by_a_signal_exits_128_plus_the_signal(core, namespace) -> None:
    # `$$` is an escaped `$` in Kubernetes commands: `$$$$` reaches the shell as `$$`.
    make_pod(core, namespace, "sig", [shell("main", "kill -KILL $$$$")], restartPolicy="Never")
    pod = eventually(lambda: phase_is(core, namespace, "sig", "Failed"))
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["signal"], term["reason"]) == (137, 9, "Error")


def test_on_failure_restarts_with_crash_loop_back_off(core, namespace) -> None:
    make_pod(
        core, namespace, "loop", [shell("main", "echo try; exit 1")], restartPolicy="OnFailure"
    )
    seen: set[str] = set()

    def restarted_twice() -> bool:
        cs = raw_pod(core, namespace, "loop")["status"]["containerStatuses"][0]
        seen.add(json.dumps(cs["state"].get("waiting", {}).get("reason")))
        return cs["restartCount"] >= 2 and cs["lastState"]["terminated"]["exitCode"] == 1

    eventually(restarted_twice)
    eventually(
        lambda: (
            "CrashLoopBackOff"
            in raw_pod(core, namespace, "loop")["status"]["containerStatuses"][0]
            .get("state", {})
            .get("waiting", {})
            .get("reason", "")
            or '"CrashLoopBackOff"' in seen
        )
    )
    assert raw_pod(core, namespace, "loop")["status"]["phase"] == "Running"
    assert core.read_namespaced_pod_log("loop", namespace, previous=True) == "try\n"

    def started_events() -> list[Any]:
        return [
            e
            for e in core.list_namespaced_event(namespace).items
            if e.involved_object.name == "loop" and e.reason == "Started"
        ]

    # Repeats are counted on one event, as the kubelet's event correlator does.
    (started,) = eventually(lambda: (ev := started_events()) and ev[0].count >= 2 and ev)
    assert started.message == "Started container main"


def test_on_failure_does_not_restart_a_success(core, namespace) -> None:
    make_pod(core, namespace, "once", [shell("main", "exit 0")], restartPolicy="OnFailure")
    pod = eventually(lambda: phase_is(core, namespace, "once", "Succeeded"))
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_env_config_maps_secrets_and_volumes_reach_the_process(core, namespace) -> None:
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "cfg"}, "data": {"mode": "fast", "app.yaml": "lr: 0.1\n"}}
    )
    core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "creds"}, "data": {"token": base64.b64encode(b"s3cret").decode()}},
    )
    script = (
        'echo "$MODE $TOKEN $POD $GREETING $CFG_mode"; '
        'cat "$TRAINOPS_POD_ROOT/etc/config/app.yaml"; cat etc/creds/token; echo; pwd'
    )
    container = shell(
        "main",
        script,
        env=[
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "GREETING", "value": "hi-$(POD)"},
        ],
        envFrom=[{"prefix": "CFG_", "configMapRef": {"name": "cfg"}}],
        volumeMounts=[
            {"name": "cfg", "mountPath": "/etc/config"},
            {"name": "creds", "mountPath": "/etc/creds"},
        ],
    )
    make_pod(
        core,
        namespace,
        "env",
        [container],
        restartPolicy="Never",
        volumes=[
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {"name": "creds", "secret": {"secretName": "creds"}},
        ],
    )
    pod = eventually(lambda: phase_is(core, namespace, "env", "Succeeded"))
    lines = core.read_namespaced_pod_log("env", namespace).splitlines()
    assert lines[:3] == ["fast s3cret env hi-env fast", "lr: 0.1", "s3cret"]
    assert lines[3].endswith(f"/pods/{pod['metadata']['uid']}/root")


def test_a_missing_secret_keeps_the_container_waiting_with_the_reason(core, namespace) -> None:
    env = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]
    make_pod(core, namespace, "wait", [shell("main", "true", env=env)], restartPolicy="Never")

    def waiting() -> dict:
        cs = raw_pod(core, namespace, "wait")["status"]["containerStatuses"][0]
        return cs["state"]["waiting"]

    state = eventually(
        lambda: waiting().get("reason") == "CreateContainerConfigError" and waiting()
    )
    assert state["message"] == 'secret "nope" not found'


def test_init_containers_run_first_and_share_empty_dirs(core, namespace) -> None:
    mount = [{"name": "work", "mountPath": "/work"}]
    make_pod(
        core,
        namespace,
        "init",
        [
            shell(
                "main",
                "cat $TRAINOPS_POD_ROOT/work/a $TRAINOPS_POD_ROOT/work/b",
                volumeMounts=mount,
            )
        ],
        initContainers=[
            shell("first", "echo one > $TRAINOPS_POD_ROOT/work/a", volumeMounts=mount),
            shell("second", "echo two > $TRAINOPS_POD_ROOT/work/b", volumeMounts=mount),
        ],
        volumes=[{"name": "work", "emptyDir": {}}],
        restartPolicy="Never",
    )
    pod = eventually(lambda: phase_is(core, namespace, "init", "Succeeded"))
    assert [
        s["state"]["terminated"]["exitCode"] for s in pod["status"]["initContainerStatuses"]
    ] == [0, 0]
    assert core.read_namespaced_pod_log("init", namespace) == "one\ntwo\n"


def test_a_failed_init_container_fails_a_never_pod(core, namespace) -> None:
    make_pod(
        core,
        namespace,
        "initfail",
        [shell("main", "echo never")],
        initContainers=[shell("first", "exit 2")],
        restartPolicy="Never",
    )
    pod = eventually(lambda: phase_is(core, namespace, "initfail", "Failed"))
    assert pod["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "PodInitializing"}
    }


def test_log_options_tail_timestamps_and_limit(core, namespace) -> None:
    make_pod(
        core,
        namespace,
        "many",
        [shell("main", "for i in 1 2 3 4 5; do echo line$i; done")],
        restartPolicy="Never",
    )
    eventually(lambda: phase_is(core, namespace, "many", "Succeeded"))
    assert core.read_namespaced_pod_log("many", namespace, tail_lines=2) == "line4\nline5\n"
    stamped = core.read_namespaced_pod_log("many", namespace, timestamps=True, tail_lines=1)
    stamp, text = stamped.rstrip("\n").split(" ")
    assert text == "line5" and stamp.endswith("Z") and "T" in stamp
    assert core.read_namespaced_pod_log("many", namespace, limit_bytes=8) == "line1\nli"
    assert core.read_namespaced_pod_log("many", namespace, since_seconds=3600).count("\n") == 5


def test_following_a_log_streams_until_the_process_ends(core, namespace) -> None:
    script = "echo first; sleep 0.3; echo second"
    make_pod(core, namespace, "follow", [shell("main", script)], restartPolicy="Never")
    eventually(
        lambda: (
            raw_pod(core, namespace, "follow")["status"].get("phase") in ("Running", "Succeeded")
        )
    )
    resp = core.read_namespaced_pod_log("follow", namespace, follow=True, _preload_content=False)
    assert resp.data.decode() == "first\nsecond\n"


def test_graceful_deletion_runs_the_term_handler_before_the_pod_disappears(
    core, namespace, tmp_path: Path
) -> None:
    marker = tmp_path / "terminated"
    script = f"trap 'sleep 0.3; echo done > {marker}; exit 0' TERM; echo up; while true; do sleep 0.05; done"
    make_pod(core, namespace, "graceful", [shell("main", script)], terminationGracePeriodSeconds=10)
    eventually(lambda: "up" in core.read_namespaced_pod_log("graceful", namespace))
    core.delete_namespaced_pod("graceful", namespace)
    still = raw_pod(core, namespace, "graceful")
    assert still["metadata"].get("deletionTimestamp")
    assert not marker.exists()

    def gone() -> bool:
        try:
            raw_pod(core, namespace, "graceful")
        except Exception as e:  # ApiException 404
            return getattr(e, "status", None) == 404
        return False

    eventually(gone)
    assert marker.read_text() == "done\n"


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    core, local_node, namespace
) -> None:
    from kubernetes import watch

    script = "trap '' TERM; echo up; while true; do sleep 0.05; done"
    make_pod(core, namespace, "stubborn", [shell("main", script)], terminationGracePeriodSeconds=1)
    eventually(lambda: "up" in core.read_namespaced_pod_log("stubborn", namespace))
    seen: list[dict] = []
    done = threading.Event()

    def collect() -> None:
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod,
            namespace,
            field_selector="metadata.name=stubborn",
            timeout_seconds=20,
        ):
            seen.append(ev["raw_object"])
            if ev["type"] == "DELETED":
                break
        done.set()

    t = threading.Thread(target=collect, daemon=True)
    t.start()
    eventually(lambda: seen)  # the watch is established
    core.delete_namespaced_pod("stubborn", namespace)
    assert done.wait(20)
    final = [
        cs["state"]["terminated"]
        for obj in seen
        for cs in obj.get("status", {}).get("containerStatuses", [])
        if "terminated" in cs["state"]
    ]
    assert final and (final[-1]["exitCode"], final[-1]["signal"]) == (137, 9)
    assert seen[-1]["status"]["phase"] == "Failed"


def test_python_processes_work_too(core, namespace) -> None:
    c = {"name": "py", "image": "python:3.11", "command": [PY, "-c", "print(6 * 7)"]}
    make_pod(core, namespace, "py", [c], restartPolicy="Never")
    eventually(lambda: phase_is(core, namespace, "py", "Succeeded"))
    assert core.read_namespaced_pod_log("py", namespace) == "42\n"


def test_kubectl_run_and_logs(kubectl, namespace) -> None:
    kubectl(
        "run",
        "x",
        "-n",
        namespace,
        "--restart=Never",
        "--image=busybox",
        "--",
        "sh",
        "-c",
        "echo hi",
    )
    eventually(
        lambda: (
            kubectl("get", "pod", "x", "-n", namespace, "-o", "jsonpath={.status.phase}").stdout
            == "Succeeded"
        )
    )
    assert kubectl("logs", "x", "-n", namespace).stdout == "hi\n"


def test_active_deadline_seconds_fails_the_pod(core, namespace) -> None:
    make_pod(
        core,
        namespace,
        "deadline",
        [shell("main", "while true; do sleep 0.05; done")],
        activeDeadlineSeconds=1,
        terminationGracePeriodSeconds=1,
    )
    pod = eventually(lambda: phase_is(core, namespace, "deadline", "Failed"))
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert (
        pod["status"]["message"] == "Pod was active on the node longer than the specified deadline"
    )
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143


def test_a_readiness_probe_gates_ready(core, namespace, tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    probe = {"exec": {"command": ["test", "-e", str(flag)]}, "periodSeconds": 1}
    container = shell("main", "while true; do sleep 0.05; done", readinessProbe=probe)
    make_pod(core, namespace, "probed", [container], terminationGracePeriodSeconds=1)
    pod = eventually(lambda: phase_is(core, namespace, "probed", "Running"))
    cs = pod["status"]["containerStatuses"][0]
    assert (cs["ready"], cs["started"]) == (False, True)
    flag.write_text("")
    eventually(
        lambda: raw_pod(core, namespace, "probed")["status"]["containerStatuses"][0]["ready"]
    )
    conds = {
        c["type"]: c["status"] for c in raw_pod(core, namespace, "probed")["status"]["conditions"]
    }
    assert conds["Ready"] == "True"


def test_a_failing_liveness_probe_restarts_the_container(core, namespace) -> None:
    probe = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}
    container = shell("main", "while true; do sleep 0.05; done", livenessProbe=probe)
    make_pod(core, namespace, "unhealthy", [container], terminationGracePeriodSeconds=1)
    cs = eventually(
        lambda: (
            (s := raw_pod(core, namespace, "unhealthy")["status"]["containerStatuses"][0])[
                "restartCount"
            ]
            >= 1
            and s
        )
    )
    assert cs["lastState"]["terminated"]["exitCode"] == 143


def test_a_pre_stop_hook_runs_before_sigterm(core, namespace, tmp_path: Path) -> None:
    order = tmp_path / "order"
    script = f"trap 'echo term >> {order}; exit 0' TERM; echo up; while true; do sleep 0.05; done"
    hook = {"exec": {"command": ["sh", "-c", f"echo prestop >> {order}"]}}
    container = shell("main", script, lifecycle={"preStop": hook})
    make_pod(core, namespace, "hooked", [container], terminationGracePeriodSeconds=5)
    eventually(lambda: "up" in core.read_namespaced_pod_log("hooked", namespace))
    core.delete_namespaced_pod("hooked", namespace)
    eventually(lambda: order.exists() and order.read_text() == "prestop\nterm\n")


def test_termination_messages_from_the_file_and_from_the_log(core, namespace) -> None:
    by_file = shell(
        "main", 'echo "out of memory in step 7" > "$TRAINOPS_POD_ROOT/dev/termination-log"; exit 1'
    )
    by_log = shell(
        "main",
        "echo loading; echo 'ValueError: bad shape' >&2; exit 2",
        terminationMessagePolicy="FallbackToLogsOnError",
    )
    make_pod(core, namespace, "msgfile", [by_file], restartPolicy="Never")
    make_pod(core, namespace, "msglog", [by_log], restartPolicy="Never")
    pod = eventually(lambda: phase_is(core, namespace, "msgfile", "Failed"))
    assert (
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        == "out of memory in step 7\n"
    )
    pod = eventually(lambda: phase_is(core, namespace, "msglog", "Failed"))
    message = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    assert sorted(message.splitlines()) == ["ValueError: bad shape", "loading"]


def test_a_sidecar_runs_beside_the_main_container_and_is_stopped_after_it(core, namespace) -> None:
    mount = [{"name": "work", "mountPath": "/work"}]
    sidecar = shell(
        "sidecar",
        "trap 'exit 0' TERM; while true; do date > $TRAINOPS_POD_ROOT/work/beat; sleep 0.05; done",
        restartPolicy="Always",
        volumeMounts=mount,
    )
    main = shell(
        "main",
        "while [ ! -e $TRAINOPS_POD_ROOT/work/beat ]; do sleep 0.05; done; echo saw the sidecar",
        volumeMounts=mount,
    )
    make_pod(
        core,
        namespace,
        "sidecar",
        [main],
        initContainers=[sidecar],
        volumes=[{"name": "work", "emptyDir": {}}],
        restartPolicy="Never",
        terminationGracePeriodSeconds=2,
    )
    pod = eventually(lambda: phase_is(core, namespace, "sidecar", "Succeeded"))
    (side,) = pod["status"]["initContainerStatuses"]
    assert "terminated" in side["state"] and side["restartCount"] == 0
    assert (
        core.read_namespaced_pod_log("sidecar", namespace, container="main") == "saw the sidecar\n"
    )


def test_a_missing_executable_is_a_start_error_with_a_failed_event_not_started(
    core, namespace
) -> None:
    make_pod(
        core,
        namespace,
        "noexec",
        [{"name": "main", "image": "busybox", "command": ["no-such-program", "x"]}],
        restartPolicy="Never",
    )
    pod = eventually(lambda: phase_is(core, namespace, "noexec", "Failed"))
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    message = 'exec: "no-such-program": executable file not found in $PATH'
    assert term["message"] == message

    def reasons() -> dict[str, str]:
        items = core.list_namespaced_event(namespace).items
        return {e.reason: e.message for e in items if e.involved_object.name == "noexec"}

    seen = eventually(lambda: (r := reasons()) and "Failed" in r and r)
    assert seen["Failed"] == f'Error: failed to start container "main": {message}'
    assert "Started" not in seen


def test_a_pods_events_are_listed_in_the_order_they_happened(core, namespace) -> None:
    # Real event names end in the hex nanoseconds of their creation, so a list (by name) is in
    # time order; `kubectl describe` keeps that order for events of the same second. On the
    # host's network, so a node without pod networks adds no HostNetwork warning to the list.
    make_pod(
        core, namespace, "order", [shell("main", "exit 0")], restartPolicy="Never", hostNetwork=True
    )
    eventually(lambda: phase_is(core, namespace, "order", "Succeeded"))

    def reasons() -> list[str]:
        items = core.list_namespaced_event(namespace).items
        return [e.reason for e in items if e.involved_object.name == "order"]

    assert eventually(lambda: len(r := reasons()) == 4 and r) == [
        "Scheduled",
        "Pulled",
        "Created",
        "Started",
    ]
