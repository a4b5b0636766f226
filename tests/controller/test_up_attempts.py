"""Attempts under `trainops up`: replicas restarted in place by the node's kubelet, each failed
run's log readable, and one restart count everywhere; an ExitCode replica, whose pod the
controller recreates, has its failed run's log kept by the controller.

The kubelet is the process kubelet (on the reference tier it joins the real kube-apiserver as
a node), with the kubelet's own CrashLoopBackOff: the first restart at once, the next after
10 s. Each failing run lasts a second or two, so the controller sees every run before the next.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.up.conftest import eventually

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _apply(
    kubectl: Kubectl,
    tmp_path: Path,
    name: str,
    script: str,
    limit: int,
    policy: str = "OnFailure",
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"backoffLimit": limit},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "restartPolicy": policy,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "busybox",
                                    "command": ["sh", "-c", script],
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    path = tmp_path / f"{uuid.uuid4().hex}.yaml"
    path.write_text(yaml.safe_dump(job))
    result = kubectl("apply", "-f", str(path))
    assert result.returncode == 0, result.stderr


def _json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    out = kubectl("get", *args, "-o", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def _phase(kubectl: Kubectl, job: str, phase: str, timeout: float = 60) -> dict[str, Any]:
    def check() -> dict[str, Any] | bool:
        status = _json(kubectl, "tfj", job).get("status") or {}
        return status if status.get("phase") == phase else False

    found: dict[str, Any] = eventually(check, timeout=timeout)  # type: ignore[arg-type]
    return found


def _kept(kubectl: Kubectl, job: str) -> dict[str, str]:
    return dict(_json(kubectl, "configmap", f"{job}-attempts").get("data") or {})


def test_a_worker_failing_twice_then_succeeding_keeps_its_pod_and_both_failed_runs_logs(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    script = (
        f"n=$(cat {runs} 2>/dev/null || echo 0); echo $((n+1)) > {runs}; "
        'echo "attempt $n"; if [ "$n" -lt 2 ]; then sleep 2; echo "failing $n"; exit 1; fi'
    )
    _apply(kubectl, tmp_path, "flaky", script, limit=3)
    status = _phase(kubectl, "flaky", "Succeeded")

    pod = _json(kubectl, "pod", "flaky-worker-0")
    (cs,) = pod["status"]["containerStatuses"]
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert cs["restartCount"] == 2  # the same pod ran three times
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    (entry,) = status["tasks"][0]["replicas"]
    assert entry["restartCount"] == cs["restartCount"] == status["backoffCount"]
    assert entry["uid"] == pod["metadata"]["uid"]
    table = kubectl("get", "pods", "flaky-worker-0", "--no-headers").stdout.split()
    assert table[3] == "2"  # RESTARTS
    assert kubectl("get", "tfj", "flaky", "--no-headers").stdout.split()[3] == "2"

    previous = kubectl("logs", "flaky-worker-0", "--previous")
    assert previous.returncode == 0, previous.stderr
    assert previous.stdout == "attempt 1\nfailing 1\n"
    assert kubectl("logs", "flaky-worker-0").stdout == "attempt 2\n"

    attempts = [(a["attempt"], a["exitCode"], a.get("keptLog")) for a in entry["attempts"]]
    assert attempts == [
        (0, 1, {"configMap": "flaky-attempts", "key": "worker-0.0.log"}),
        (1, 1, {"configMap": "flaky-attempts", "key": "worker-0.1.log"}),
        (2, 0, None),
    ]
    kept = eventually(lambda: (k := _kept(kubectl, "flaky")) and len(k) == 2 and k, timeout=10)
    assert kept == {
        "worker-0.0.log": "attempt 0\nfailing 0\n",
        "worker-0.1.log": "attempt 1\nfailing 1\n",
    }
    owner = _json(kubectl, "configmap", "flaky-attempts")["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("TensorFlowTrainingJob", "flaky")


def test_a_worker_that_always_fails_ends_failed_after_exactly_backoff_limit_restarts(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    script = f'echo run >> {runs}; echo "run $(wc -l < {runs})"; sleep 1; exit 3'
    _apply(kubectl, tmp_path, "doomed", script, limit=2)

    def counts_agree() -> bool:
        pod = _json(kubectl, "pods", "-l", "batch.tensorstack.dev/job-name=doomed")["items"]
        status = _json(kubectl, "tfj", "doomed").get("status") or {}
        if len(pod) != 1 or not status.get("tasks"):
            return False
        shown = pod[0]["status"].get("containerStatuses", [{}])[0].get("restartCount")
        return shown == 1 and status["tasks"][0]["replicas"][0]["restartCount"] == 1

    eventually(counts_agree, timeout=30)  # between the first and the second restart
    status = _phase(kubectl, "doomed", "Failed")
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "BackoffLimitExceeded"
    assert status["backoffCount"] == 2
    (entry,) = status["tasks"][0]["replicas"]
    assert entry["restartCount"] == 2 and entry["phase"] == "Failed"
    assert [(a["attempt"], a["exitCode"]) for a in entry["attempts"]] == [(0, 3), (1, 3), (2, 3)]
    # Stopped before the kubelet's third restart: the pod is gone, and with it every process.
    eventually(
        lambda: not _json(kubectl, "pods", "-l", "batch.tensorstack.dev/job-name=doomed")["items"],
        timeout=30,
    )
    assert runs.read_text().count("run") == 3
    kept = eventually(lambda: (k := _kept(kubectl, "doomed")) and len(k) == 3 and k, timeout=10)
    assert kept == {f"worker-0.{n}.log": f"run {n + 1}\n" for n in range(3)}


def test_an_exit_code_replica_is_recreated_and_its_killed_runs_log_is_kept(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    marker = tmp_path / "killed-once"
    script = (
        f'if [ -e {marker} ]; then echo "second run"; exit 0; fi; touch {marker}; '
        'echo "first run"; sleep 1; echo "killed"; exit 137'
    )
    _apply(kubectl, tmp_path, "recreated", script, limit=2, policy="ExitCode")
    status = _phase(kubectl, "recreated", "Succeeded")
    (entry,) = status["tasks"][0]["replicas"]
    assert entry["restartCount"] == 1 == status["backoffCount"]
    first, second = entry["attempts"]
    assert (first["attempt"], first["exitCode"], second["attempt"], second["exitCode"]) == (
        0,
        137,
        1,
        0,
    )
    assert first["podUID"] != second["podUID"] == entry["uid"]  # a new pod
    assert first["keptLog"] == {"configMap": "recreated-attempts", "key": "worker-0.0.log"}
    pod = _json(kubectl, "pod", "recreated-worker-0")
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    # The new pod has no previous run; the first one's log is the controller's copy.
    assert kubectl("logs", "recreated-worker-0", "--previous").returncode != 0
    kept = _kept(kubectl, "recreated")
    assert kept == {"worker-0.0.log": "first run\nkilled\n"}


def test_a_config_map_of_that_name_the_job_does_not_own_is_left_alone(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    mine = kubectl("create", "configmap", "mine-attempts", "--from-literal=notes=keep me")
    assert mine.returncode == 0, mine.stderr
    marker = tmp_path / "killed-once"
    script = f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; echo lost; sleep 1; exit 137"
    _apply(kubectl, tmp_path, "mine", script, limit=2, policy="ExitCode")
    status = _phase(kubectl, "mine", "Succeeded")
    assert status["backoffCount"] == 1  # the restart went on without its log kept
    assert _kept(kubectl, "mine") == {"notes": "keep me"}
    assert "ownerReferences" not in _json(kubectl, "configmap", "mine-attempts")["metadata"]
