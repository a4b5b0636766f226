"""The end-to-end tier: trainops as a platform team runs it, on the kind cluster of
hack/kind-cluster (real kubelets and containerd on three nodes, kube-proxy, CoreDNS), with
deploy/ applied from the image (hack/kind/deploy). Everything goes through kubectl, as a user's
commands do.

hack/e2e-tests brings the cluster up, loads the images, applies deploy/ and sets
TRAINOPS_E2E_KUBECONFIG; without it these tests skip, saying so.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kubectl import TRAINING_IMAGE, get, kubectl, needs_cluster
from tests.support.cluster import eventually

REPO = Path(__file__).resolve().parents[2]
LIMITS_CPU = "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"

pytestmark = needs_cluster


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_webhook_refuses_a_job_through_its_service_naming_the_field(namespace: str) -> None:
    config = get("validatingwebhookconfiguration", "trainops-webhook")
    services = [w["clientConfig"].get("service") for w in config["webhooks"]]
    assert services and all(s and s["name"] == "trainops-webhook" for s in services), services

    denied = REPO / "examples" / "denied" / "limits-below-requests.yaml"
    result = kubectl("-n", namespace, "apply", "-f", str(denied), check=False)

    assert result.returncode == 1
    assert re.fullmatch(
        r'Error from server \(Forbidden\): error when creating "[^"]*limits-below-requests'
        r'\.yaml": admission webhook "validate\.trainingjobs\.batch\.tensorstack\.dev" '
        r"denied the request: " + re.escape(LIMITS_CPU) + r": .+",
        result.stderr.strip(),
        flags=re.DOTALL,
    ), result.stderr
    assert kubectl("-n", namespace, "get", "tensorflowtrainingjobs", "-o", "name").stdout == ""


def _example(name: str, image: str, spread: str | None = None) -> list[dict[str, Any]]:
    """examples/training/NAME with the training image built here; with `spread`, the pods of
    that replica type kept on different nodes (a required anti-affinity, as a user asking for
    it writes)."""
    path = REPO / "examples" / "training" / name
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    (job,) = [d for d in documents if d["kind"].endswith("TrainingJob")]
    for replica in job["spec"]["replicaSpecs"]:
        pod = replica["template"]
        for container in pod["spec"]["containers"]:
            container["image"] = image
        if replica["type"] != spread:
            continue
        label = {"e2e/spread": f"{job['metadata']['name']}-{spread}"}
        pod.setdefault("metadata", {}).setdefault("labels", {}).update(label)
        pod["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": label},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return documents


def _wait_succeeded(namespace: str, kind: str, name: str, timeout: float) -> None:
    def succeeded() -> bool:
        status = get("-n", namespace, kind, name).get("status", {})
        assert status.get("phase") != "Failed", status
        return status.get("phase") == "Succeeded"

    eventually(succeeded, timeout=timeout, interval=5)


def _losses(log: str) -> list[float]:
    return [
        float(m) for m in re.findall(r"^epoch \d+/\d+ loss ([0-9.]+)$", log, flags=re.MULTILINE)
    ]


def test_tensorflow_multiworker_trains_across_two_nodes(namespace: str) -> None:
    manifests = _example("tensorflow-mwms.yaml", TRAINING_IMAGE, spread="worker")
    # The progress reporter, as the example's header says to provide it (docs/PROGRESS.md).
    reporter = REPO / "trainops_progress.py"
    kubectl("-n", namespace, "create", "configmap", "trainops-progress", f"--from-file={reporter}")
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    _wait_succeeded(namespace, "tensorflowtrainingjobs", "tf-mwms", timeout=900)

    # The job Succeeds with worker 0; worker 1 (cleanUpPolicy None keeps it) may still be
    # ending its process then, on a loaded machine for a few seconds.
    def workers_done() -> list[dict[str, Any]]:
        pods = get("-n", namespace, "pods")["items"]
        workers = [p for p in pods if p["metadata"]["name"].startswith("tf-mwms-worker-")]
        assert len(workers) == 2, [p["metadata"]["name"] for p in pods]
        assert all(p["status"]["phase"] != "Failed" for p in workers), workers
        return workers if all(p["status"]["phase"] == "Succeeded" for p in workers) else []

    workers = eventually(workers_done, timeout=120, interval=2)
    nodes = {p["spec"]["nodeName"] for p in workers}
    assert len(nodes) == 2, nodes
    for pod in workers:
        log = kubectl("-n", namespace, "logs", pod["metadata"]["name"]).stdout
        losses = _losses(log)
        assert len(losses) >= 2 and losses[-1] < losses[0], log
        assert "training done" in log

    # In containers too, the workers reported to the controller's progress endpoint through its
    # Service: the job's status holds the whole run and the last epoch's loss (written at most
    # every few seconds: it may trail the end), and `kubectl get` shows it.
    def complete() -> dict[str, Any]:
        job = get("-n", namespace, "tensorflowtrainingjobs", "tf-mwms")
        progress: dict[str, Any] = job.get("status", {}).get("progress") or {}
        return progress if progress.get("percent") == 100 else {}

    progress = eventually(complete, timeout=60, interval=2)
    assert (progress["step"], progress["totalSteps"], progress["epoch"]) == (100, 100, 5)
    assert progress["metrics"]["loss"] == pytest.approx(losses[-1], abs=2e-4)
    header, row = kubectl("-n", namespace, "get", "tensorflowtrainingjobs", "tf-mwms").stdout.split(
        "\n"
    )[:2]
    at = header.index("PROGRESS")  # kubectl aligns each column's values under its heading
    assert row[at:].split()[0] == "100", (header, row)


def test_xgboost_master_and_two_workers_train_to_succeeded(namespace: str) -> None:
    manifests = _example("xgboost-dist.yaml", TRAINING_IMAGE, spread="worker")
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    _wait_succeeded(namespace, "xgboosttrainingjobs", "xgb-dist", timeout=900)

    pods = {p["metadata"]["name"]: p for p in get("-n", namespace, "pods")["items"]}
    workers = [n for n in pods if n.startswith("xgb-dist-worker-")]
    assert sorted(workers) == ["xgb-dist-worker-0", "xgb-dist-worker-1"], sorted(pods)
    assert len({pods[n]["spec"]["nodeName"] for n in workers}) == 2, workers
    log = kubectl("-n", namespace, "logs", "xgb-dist-master-0").stdout
    rounds = [float(x) for x in re.findall(r"\[\d+\]\teval-logloss:(\S+)", log)]
    assert len(rounds) >= 2 and rounds[-1] < rounds[0], log
    assert "rank 0 of 3" in log and "training done" in log


GOOD = REPO / "examples" / "tensorflow-mnist.yaml"


def _dry_run_create(namespace: str) -> subprocess.CompletedProcess[str]:
    # A server-side dry run goes through admission (the webhooks have sideEffects: None).
    return kubectl("-n", namespace, "create", "--dry-run=server", "-f", str(GOOD), check=False)


def test_without_a_webhook_pod_jobs_are_refused_as_failure_policy_fail_says_then_admitted(
    namespace: str,
) -> None:
    assert _dry_run_create(namespace).returncode == 0
    kubectl("-n", "trainops-system", "scale", "deployment/trainops-webhook", "--replicas=0")
    try:

        def no_endpoints() -> bool:
            slices = get(
                "-n",
                "trainops-system",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=trainops-webhook",
            )["items"]
            return not any(s.get("endpoints") for s in slices)

        eventually(no_endpoints, timeout=120, interval=1)
        refused = _dry_run_create(namespace)
        assert refused.returncode == 1
        assert re.search(
            r'Internal error occurred: failed calling webhook "[a-z.]+\.tensorstack\.dev": '
            r"failed to call webhook: Post \"https://trainops-webhook\.trainops-system\.svc:443/",
            refused.stderr,
        ), refused.stderr
    finally:
        kubectl("-n", "trainops-system", "scale", "deployment/trainops-webhook", "--replicas=2")
    kubectl(
        "-n",
        "trainops-system",
        "rollout",
        "status",
        "deployment/trainops-webhook",
        "--timeout=110s",
    )
    eventually(lambda: _dry_run_create(namespace).returncode == 0, timeout=60, interval=1)


def test_a_deleted_webhook_pod_is_replaced_and_the_other_replica_keeps_admitting(
    namespace: str,
) -> None:
    pods = get("-n", "trainops-system", "pods", "-l", "app.kubernetes.io/name=trainops-webhook")
    names = sorted(p["metadata"]["name"] for p in pods["items"])
    assert len(names) == 2, names
    kubectl("-n", "trainops-system", "delete", "pod", names[0], "--wait=false")
    results = []
    for _ in range(10):
        results.append(_dry_run_create(namespace))
    assert [r.returncode for r in results] == [0] * 10, [r.stderr for r in results if r.returncode]
    kubectl(
        "-n",
        "trainops-system",
        "rollout",
        "status",
        "deployment/trainops-webhook",
        "--timeout=110s",
    )


# -- a worker node lost mid-training (last in this file: each test stops a node and restores it)

LOST_NODE_GRACE = 60  # the controller's --lost-node-grace default (deploy/ does not set it)
RESTART_COUNT = "batch.tensorstack.dev/restart-count"


@pytest.fixture
def stopped_nodes() -> Iterator[list[str]]:
    """Nodes a test killed (`podman kill`, the node's container): started again afterwards,
    then `hack/kind-cluster up` rewrites the pod network's routes and waits for 3 Ready nodes,
    and deploy/'s Deployments are back to full strength before the next test."""
    stopped: list[str] = []
    try:
        yield stopped
    finally:
        for node in stopped:
            subprocess.run(["podman", "start", node], capture_output=True, text=True, timeout=120)
        if stopped:
            up = subprocess.run(
                [str(REPO / "hack" / "kind-cluster"), "up"],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert up.returncode == 0, up.stderr[-2000:]
            for deployment in ("trainops-webhook", "trainops-controller", "trainops-gitops"):
                kubectl(
                    "-n",
                    "trainops-system",
                    "rollout",
                    "status",
                    f"deployment/{deployment}",
                    "--timeout=300s",
                )


def _long_training(policy: str) -> list[dict[str, Any]]:
    """examples/training/tensorflow-mwms.yaml, long enough to lose a node mid-training: 12
    epochs of ≥ 5 s each, the workers on two nodes if they can be (a preferred anti-affinity:
    a required one would leave a replacement nowhere to go on the node left), small requests
    (the node left also runs the other half of deploy/), a backoff limit that the surviving
    worker's own crashes (its peer vanished; restarted in place, counted) do not use up."""
    documents = _example("tensorflow-mwms.yaml", TRAINING_IMAGE)
    (script,) = [d for d in documents if d["kind"] == "ConfigMap"]
    source = script["data"]["train.py"]
    source = source.replace("import json\n", "import json\nimport time\n", 1)
    source = source.replace(
        'print(f"epoch {epoch}/{EPOCHS} loss {total / STEPS:.4f}", flush=True)',
        'print(f"epoch {epoch}/{EPOCHS} loss {total / STEPS:.4f}", flush=True)\n    time.sleep(5)',
    )
    assert "time.sleep(5)" in source
    compile(source, "train.py", "exec")  # the edit kept it Python
    script["data"]["train.py"] = source
    (job,) = [d for d in documents if d["kind"] == "TensorFlowTrainingJob"]
    job["spec"]["runPolicy"]["backoffLimit"] = 10
    (workers,) = job["spec"]["replicaSpecs"]
    workers["restartPolicy"] = policy
    label = {"e2e/spread": "tf-mwms-worker"}
    pod = workers["template"]
    pod.setdefault("metadata", {}).setdefault("labels", {}).update(label)
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": label},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }
    for container in pod["spec"]["containers"]:
        container["resources"]["requests"] = {"cpu": "250m", "memory": "512Mi"}
        assert container["command"] == ["python3", "/scripts/train.py"], container["command"]
        container["command"] = [*container["command"], "--epochs", "12"]
    return documents


def _training_on(namespace: str, pod: str) -> str:
    """Wait until `pod` has printed its first epoch (it trains, in sync with its peer); its node."""

    def first_epoch() -> bool:
        log = kubectl("-n", namespace, "logs", pod, check=False).stdout
        return "epoch 1/" in log

    eventually(first_epoch, timeout=600, interval=3)
    node = get("-n", namespace, "pod", pod)["spec"]["nodeName"]
    assert node, pod
    return str(node)


def _stop(node: str, stopped: list[str]) -> None:
    stopped.append(node)
    result = subprocess.run(["podman", "kill", node], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def _pods_on(namespace: str, node: str) -> list[str]:
    pods = get("-n", namespace, "pods")["items"]
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == node)


def test_a_lost_worker_node_is_replaced_on_the_node_left_counted_once_and_the_job_succeeds(
    namespace: str, stopped_nodes: list[str]
) -> None:
    kubectl(
        "-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(_long_training("OnFailure"))
    )
    node = _training_on(namespace, "tf-mwms-worker-1")
    _training_on(namespace, "tf-mwms-worker-0")
    lost = _pods_on(namespace, node)
    assert "tf-mwms-worker-1" in lost
    before = {n: get("-n", namespace, "pod", n)["metadata"]["uid"] for n in lost}
    _stop(node, stopped_nodes)

    # NotReady after ~40-50 s, lost after our 60 s grace: each lost replica gets a new pod, on
    # the node left, created with its one counted restart.
    def replaced() -> bool:
        pods = {p["metadata"]["name"]: p for p in get("-n", namespace, "pods")["items"]}
        return all(
            n in pods
            and pods[n]["metadata"]["uid"] != before[n]
            and pods[n]["spec"].get("nodeName") not in (None, node)
            for n in lost
        )

    eventually(replaced, timeout=120 + LOST_NODE_GRACE + 120, interval=5)
    _wait_succeeded(namespace, "tensorflowtrainingjobs", "tf-mwms", timeout=900)

    status = get("-n", namespace, "tensorflowtrainingjobs", "tf-mwms")["status"]
    replicas = {r["name"]: r for t in status["tasks"] for r in t["replicas"]}
    for name in lost:
        assert replicas[name]["restartCount"] == 1, replicas[name]  # counted once
        pod = get("-n", namespace, "pod", name)
        assert pod["metadata"]["annotations"][RESTART_COUNT] == "1"
        assert pod["spec"]["nodeName"] != node
        assert "training done" in kubectl("-n", namespace, "logs", name).stdout
    assert status["backoffCount"] == sum(r["restartCount"] for r in replicas.values())
    events = get("-n", namespace, "events", "--field-selector", "reason=ReplicaRestart")["items"]
    messages = [e["message"] for e in events]
    for name in lost:
        wanted = f"restarting pod {name} after its node {node} was lost"
        assert sum(wanted in m for m in messages) == 1, messages


def test_under_restart_policy_never_a_lost_node_fails_the_job_naming_node_and_pod(
    namespace: str, stopped_nodes: list[str]
) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(_long_training("Never")))
    # The master's node: the other worker fails on its own when its peer vanishes (under Never
    # a worker's failure does not end the job; the master's would, with its exit code).
    node = _training_on(namespace, "tf-mwms-worker-0")
    _training_on(namespace, "tf-mwms-worker-1")
    _stop(node, stopped_nodes)

    def failed() -> dict[str, Any]:
        status: dict[str, Any] = get("-n", namespace, "tensorflowtrainingjobs", "tf-mwms")
        status = status.get("status", {})
        assert status.get("phase") == "Failed", status.get("phase")
        return status

    status = eventually(failed, timeout=120 + LOST_NODE_GRACE + 120, interval=5)
    (cond,) = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert cond["status"] == "True"
    assert cond["reason"] == "NodeLost", cond
    assert f"pod tf-mwms-worker-0 cannot go on: its node {node} was lost" in cond["message"]
    assert "restartPolicy Never" in cond["message"]
    assert status["backoffCount"] == 0
