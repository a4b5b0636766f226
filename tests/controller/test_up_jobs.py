"""Jobs run end to end under `trainops up`: real pod processes, the real controller, kubectl.

What a new user sees: `kubectl apply` a job, `kubectl get tfj` shows its phase, `-o yaml` the
seed's status, `kubectl logs` the replicas' output, `kubectl get events` the transitions.
Replicas' commands are small shell scripts, so each test decides how each replica exits.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.up.conftest import Up, eventually

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _job(
    name: str, *replicas: dict[str, Any], kind: str = "TensorFlowTrainingJob", **spec: Any
) -> str:
    main = "tensorflow" if kind == "TensorFlowTrainingJob" else "xgboost"
    specs = []
    for r in replicas:
        r = dict(r)
        command = r.pop("command")
        specs.append(
            {
                **r,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": main, "image": "busybox", "command": ["sh", "-c", command]}
                        ]
                    }
                },
            }
        )
    return yaml.safe_dump(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"replicaSpecs": specs, **spec},
        }
    )


def _apply(kubectl: Kubectl, manifest: str, tmp_path: Path) -> None:
    path = tmp_path / f"{uuid.uuid4().hex}.yaml"
    path.write_text(manifest)
    result = kubectl("apply", "-f", str(path))
    assert result.returncode == 0, result.stderr


def _status(kubectl: Kubectl, resource: str) -> dict[str, Any]:
    out = kubectl("get", resource, "-o", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout).get("status") or {})


def _phase(kubectl: Kubectl, resource: str, phase: str, timeout: float = 30) -> dict[str, Any]:
    def check() -> dict[str, Any] | bool:
        status = _status(kubectl, resource)
        return status if status.get("phase") == phase else False

    result: dict[str, Any] = eventually(check, timeout=timeout)
    return result


def _pods(kubectl: Kubectl, job: str) -> dict[str, dict[str, Any]]:
    out = kubectl("get", "pods", "-l", f"batch.tensorstack.dev/job-name={job}", "-o", "json")
    assert out.returncode == 0, out.stderr
    return {p["metadata"]["name"]: p for p in json.loads(out.stdout)["items"]}


def test_the_mnist_example_succeeds_and_kubectl_shows_phase_status_logs_and_events(
    kubectl: Kubectl,
) -> None:
    result = kubectl("apply", "-f", str(EXAMPLES / "tensorflow-mnist.yaml"))
    assert result.returncode == 0, result.stderr
    wait = kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "tfj/mnist")
    assert wait.returncode == 0, wait.stderr
    table = kubectl("get", "tfj", "mnist").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert table[1].split()[:2] == ["mnist", "Succeeded"]
    status = _status(kubectl, "tfj/mnist")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Completed"] == "True"
    assert status["aggregate"]["succeeded"] >= 1
    assert status["completionTime"] and status["startTime"]
    # The chief printed the TF_CONFIG the controller gave it.
    logs = kubectl("logs", "mnist-chief-0").stdout
    assert "'task': {'type': 'chief', 'index': 0}" in logs
    assert "mnist-worker-1.default.svc:2222" in logs
    events = kubectl(
        "get", "events", "--field-selector", "involvedObject.name=mnist", "-o", "json"
    ).stdout
    reasons = {e["reason"] for e in json.loads(events)["items"]}
    assert {"SuccessfulCreate", "Succeeded"} <= reasons


def test_a_master_that_always_fails_runs_backoff_limit_plus_one_times(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    marker = tmp_path / "runs"
    manifest = _job(
        "always-fails",
        {
            "type": "worker",
            "restartPolicy": "OnFailure",
            "command": f"echo run >> {marker}; exit 3",
        },
        runPolicy={"backoffLimit": 2},
    )
    _apply(kubectl, manifest, tmp_path)
    status = _phase(kubectl, "tfj/always-fails", "Failed")
    assert status["backoffCount"] == 2
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded"
    assert marker.read_text().count("run") == 3
    (container,) = status["tasks"][0]["replicas"][0]["containers"]
    assert container["exitCode"] == 3


def test_exit_code_policy_restarts_on_137_and_the_job_then_succeeds(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    marker = tmp_path / "killed-once"
    command = f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 137"
    manifest = _job(
        "exit-code", {"type": "worker", "restartPolicy": "ExitCode", "command": command}
    )
    _apply(kubectl, manifest, tmp_path)
    status = _phase(kubectl, "tfj/exit-code", "Succeeded")
    assert status["backoffCount"] == 1
    assert status["tasks"][0]["restartCount"] == 1


def test_exit_code_policy_does_not_restart_a_code_error(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = _job(
        "code-error", {"type": "worker", "restartPolicy": "ExitCode", "command": "exit 1"}
    )
    _apply(kubectl, manifest, tmp_path)
    status = _phase(kubectl, "tfj/code-error", "Failed")
    assert status.get("backoffCount", 0) == 0


def test_the_deadline_fails_a_job_that_runs_too_long(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = _job(
        "too-long",
        {"type": "worker", "command": "sleep 300"},
        runPolicy={"activeDeadlineSeconds": 2},
    )
    _apply(kubectl, manifest, tmp_path)
    status = _phase(kubectl, "tfj/too-long", "Failed", timeout=20)
    assert {c["type"]: c for c in status["conditions"]}["Failed"]["reason"] == "DeadlineExceeded"
    eventually(lambda: _pods(kubectl, "too-long") == {}, timeout=20)


def test_clean_up_all_deletes_every_replica_once_the_job_succeeds(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = _job(
        "clean-all",
        {"type": "worker", "replicas": 2, "command": "exit 0"},
        runPolicy={"cleanUpPolicy": "All"},
    )
    _apply(kubectl, manifest, tmp_path)
    _phase(kubectl, "tfj/clean-all", "Succeeded")
    eventually(lambda: _pods(kubectl, "clean-all") == {}, timeout=20)
    status = _status(kubectl, "tfj/clean-all")
    assert status["aggregate"]["deleted"] == 2


def test_debug_mode_runs_the_waiting_command_instead_of_the_training(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = _job(
        "debugged",
        {"type": "worker", "command": "exit 1"},
        runMode={"debug": {"enabled": True}},
    )
    _apply(kubectl, manifest, tmp_path)
    _phase(kubectl, "tfj/debugged", "Running")
    pod = _pods(kubectl, "debugged")["debugged-worker-0"]
    assert pod["spec"]["containers"][0]["command"] == ["sleep", "inf"]
    assert pod["status"]["phase"] == "Running"


def test_pause_and_resume_from_kubectl(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = _job(
        "pausable",
        {"type": "worker", "replicas": 2, "command": "sleep 300"},
        runMode={
            "pause": {
                "resumeSpecs": [
                    {"type": "worker", "command": ["sh", "-c", "echo resumed; sleep 300"]}
                ]
            }
        },
    )
    _apply(kubectl, manifest, tmp_path)
    _phase(kubectl, "tfj/pausable", "Running")
    patch = kubectl(
        "patch",
        "tfj",
        "pausable",
        "--type=merge",
        "-p",
        '{"spec":{"runMode":{"pause":{"enabled":true}}}}',
    )
    assert patch.returncode == 0, patch.stderr
    _phase(kubectl, "tfj/pausable", "Paused")
    eventually(lambda: _pods(kubectl, "pausable") == {}, timeout=20)
    patch = kubectl(
        "patch",
        "tfj",
        "pausable",
        "--type=merge",
        "-p",
        '{"spec":{"runMode":{"pause":{"enabled":false}}}}',
    )
    assert patch.returncode == 0, patch.stderr
    _phase(kubectl, "tfj/pausable", "Running")
    eventually(lambda: "resumed" in kubectl("logs", "pausable-worker-1").stdout, timeout=20)


def test_an_xgboost_job_sees_its_rank_world_size_and_master(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    show = "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT"
    manifest = _job(
        "xgb",
        {"type": "master", "command": show},
        {"type": "worker", "replicas": 2, "command": f"{show}; sleep 300"},
        kind="XGBoostTrainingJob",
    )
    _apply(kubectl, manifest, tmp_path)
    _phase(kubectl, "xgbj/xgb", "Succeeded")
    assert (
        kubectl("logs", "xgb-master-0").stdout.strip()
        == "RANK=0 WORLD_SIZE=3 MASTER=xgb-master-0:9999"
    )
    # XGBoost's default clean-up policy is None (Kubeflow's XGBoostJob default): the workers,
    # still running, are kept for their logs (under load the master may finish before a
    # worker's echo has run: wait for it).
    eventually(lambda: "RANK=2 WORLD_SIZE=3" in kubectl("logs", "xgb-worker-1").stdout, timeout=20)
    assert set(_pods(kubectl, "xgb")) == {"xgb-master-0", "xgb-worker-0", "xgb-worker-1"}


def test_deleting_a_job_deletes_its_pods_and_services(kubectl: Kubectl, tmp_path: Path) -> None:
    _apply(
        kubectl, _job("doomed", {"type": "worker", "replicas": 2, "command": "sleep 300"}), tmp_path
    )
    _phase(kubectl, "tfj/doomed", "Running")
    assert kubectl("delete", "tfj", "doomed", "--wait=true").returncode == 0
    eventually(lambda: _pods(kubectl, "doomed") == {}, timeout=30)
    services = kubectl("get", "svc", "-l", "batch.tensorstack.dev/job-name=doomed", "-o", "name")
    assert services.stdout.strip() == ""


@pytest.mark.parametrize("kind", ["tfj"])
def test_pausing_a_job_stored_before_the_webhook_defaulted_it(
    kubectl: Kubectl, running_up: Up, tmp_path: Path, kind: str
) -> None:
    """A job created while the mutating webhook was away lacks the webhook's defaults (the main
    container's port); toggling pause afterwards, webhook back, must be admitted, not denied as
    changing an immutable field."""
    # Away by matching nothing, then back: the same object (uid) that `up` removes on stop.
    name = running_up.webhook_name
    away = '[{"op":"replace","path":"/webhooks/0/rules/0/operations","value":["DELETE"]}]'
    back = '[{"op":"replace","path":"/webhooks/0/rules/0/operations","value":["CREATE","UPDATE"]}]'
    patched = kubectl("patch", "mutatingwebhookconfiguration", name, "--type=json", "-p", away)
    assert patched.returncode == 0, patched.stderr
    try:
        manifest = _job("undefaulted", {"type": "worker", "command": "sleep 300"})
        path = tmp_path / "undefaulted.yaml"
        path.write_text(manifest)
        assert kubectl("create", "-f", str(path)).returncode == 0
    finally:
        restored = kubectl("patch", "mutatingwebhookconfiguration", name, "--type=json", "-p", back)
        assert restored.returncode == 0, restored.stderr
    stored = json.loads(kubectl("get", kind, "undefaulted", "-o", "json").stdout)
    container = stored["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert "ports" not in container
    patch = kubectl(
        "patch",
        kind,
        "undefaulted",
        "--type=merge",
        "-p",
        '{"spec":{"runMode":{"pause":{"enabled":true}}}}',
    )
    assert patch.returncode == 0, patch.stderr
    _phase(kubectl, f"{kind}/undefaulted", "Paused")


def test_a_t9k_scheduler_job_is_bound_by_the_local_node_with_its_queue_and_priority(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = _job(
        "queued",
        {"type": "worker", "command": "exit 0"},
        scheduler={"t9kScheduler": {"queue": "default", "priority": 50}},
    )
    _apply(kubectl, manifest, tmp_path)
    _phase(kubectl, "tfj/queued", "Succeeded")
    pod = _pods(kubectl, "queued")["queued-worker-0"]
    assert pod["spec"]["schedulerName"] == "t9k-scheduler"
    assert pod["metadata"]["labels"]["scheduling.tensorstack.dev/queue"] == "default"
    assert pod["metadata"]["annotations"]["scheduling.tensorstack.dev/priority"] == "50"


def test_always_restarts_a_worker_that_exits_cleanly_until_the_backoff_limit(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    marker = tmp_path / "always-runs"
    manifest = _job(
        "always",
        {"type": "chief", "command": "sleep 300"},
        {"type": "worker", "restartPolicy": "Always", "command": f"echo run >> {marker}; exit 0"},
        runPolicy={"backoffLimit": 2},
    )
    _apply(kubectl, manifest, tmp_path)

    def used_up() -> dict[str, Any] | bool:
        status = _status(kubectl, "tfj/always")
        return status if status.get("backoffCount") == 2 else False

    status = eventually(used_up, timeout=30)
    eventually(lambda: marker.read_text().count("run") == 3, timeout=20)
    assert status["phase"] == "Running"  # a worker never decides the job; the chief still runs
    worker = next(t for t in status["tasks"] if t["type"] == "worker")
    assert worker["restartCount"] == 2


def test_a_replica_deleted_by_hand_comes_back_without_using_backoff(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    _apply(kubectl, _job("handled", {"type": "worker", "command": "sleep 300"}), tmp_path)
    _phase(kubectl, "tfj/handled", "Running")
    old = _pods(kubectl, "handled")["handled-worker-0"]["metadata"]["uid"]
    assert kubectl("delete", "pod", "handled-worker-0", "--wait=false").returncode == 0

    def replaced() -> bool:
        pod = _pods(kubectl, "handled").get("handled-worker-0")
        return (
            bool(pod) and pod["metadata"]["uid"] != old and pod["status"].get("phase") == "Running"
        )

    eventually(replaced, timeout=30)
    assert _status(kubectl, "tfj/handled").get("backoffCount", 0) == 0


def test_a_tensorboard_gets_a_deployment_a_service_and_a_status(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = _job(
        "boarded",
        {"type": "worker", "command": "sleep 300"},
        tensorboardSpec={
            "image": "t9kpublic/tensorboard:2.11.0",
            "trainingLogFilesets": ["t9k://pvc/logs-pvc/run1"],
        },
    )
    _apply(kubectl, manifest, tmp_path)

    def board() -> dict[str, Any] | bool:
        status = _status(kubectl, "tfj/boarded")
        return status.get("tensorboard") or False

    tensorboard = eventually(board, timeout=20)
    assert tensorboard["dependent"]["kind"] == "Deployment"
    assert tensorboard["dependent"]["name"] == "boarded-tensorboard"
    assert tensorboard["ready"] is False  # no PVC on this machine: it never becomes available
    deployment = json.loads(kubectl("get", "deploy", "boarded-tensorboard", "-o", "json").stdout)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "t9kpublic/tensorboard:2.11.0"
    assert any("run1" in arg for arg in [*container.get("command", []), *container.get("args", [])])
    volume = deployment["spec"]["template"]["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"]["claimName"] == "logs-pvc"
    service = kubectl("get", "svc", "boarded-tensorboard", "-o", "jsonpath={.spec.ports[0].port}")
    assert service.stdout == "6006"
