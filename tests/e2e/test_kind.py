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
