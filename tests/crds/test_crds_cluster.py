"""The shipped CRDs on an API server, driven with kubectl: no webhook, the CRD alone enforces.

Installs `deploy/crds/` the documented way (`kubectl apply --server-side`), then shows that
without any webhook the server itself refuses the seed XGBoost example's misplaced
`containers` (strict field validation), enforces the CEL rules (master rules, resumeSpecs
immutability) and applies the schema defaults, and that `kubectl get` uses the short names and
printer columns. Runs against the embedded API server (`tests/support/cluster.py`), or a real
cluster with `TRAINOPS_TEST_KUBECONFIG`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import update
from tests.support.cluster import Cluster

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
CRD_NAMES = (
    "tensorflowtrainingjobs.batch.tensorstack.dev",
    "xgboosttrainingjobs.batch.tensorstack.dev",
)


def kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(*args, stdin=stdin, check=False)


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    done = kubectl(
        cluster,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=trainops-tests",
        "-f",
        str(ROOT / "deploy" / "crds"),
    )
    assert done.returncode == 0, done.stderr
    cluster.wait_established(*CRD_NAMES)


def tf_job(name: str, **spec: Any) -> dict[str, Any]:
    job = yaml.safe_load((SEEDS / "tensorflow-reference.yaml").read_text())
    job["metadata"]["name"] = name
    job["spec"].update(spec)
    return job


def create(
    cluster: Cluster, namespace: str, obj: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return kubectl(cluster, "create", "-n", namespace, "-f", "-", stdin=json.dumps(obj))


def test_the_seed_xgboost_example_is_refused_for_its_misplaced_containers(
    cluster: Cluster, crds: None, namespace: str
) -> None:
    done = kubectl(cluster, "create", "-n", namespace, "-f", str(SEEDS / "xgboost-reference.yaml"))
    assert done.returncode != 0
    assert 'unknown field "spec.replicaSpecs[1].template.containers"' in done.stderr


def test_cel_rules_refuse_a_chief_with_two_replicas(
    cluster: Cluster, crds: None, namespace: str
) -> None:
    job = tf_job("two-chiefs")
    job["spec"]["replicaSpecs"][0]["type"] = "chief"
    job["spec"]["replicaSpecs"][0]["replicas"] = 2
    done = create(cluster, namespace, job)
    assert done.returncode != 0
    # One rule over the list (one evaluation per write, not one per replica type): its path
    # is the list's.
    assert (
        'spec.replicaSpecs: Invalid value: "array": '
        "chief must have exactly 1 replica: it is the master of the job"
    ) in done.stderr


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda r: r["template"]["spec"]["containers"][0].update(image=""),
            "spec.replicaSpecs[0].template.spec.containers: Required value: ",
            'the "tensorflow" container needs an image',
        ),
        (
            lambda r: r["template"]["spec"]["containers"][0].update(name="main"),
            "spec.replicaSpecs[0].template.spec.containers: Required value: ",
            'a container named "tensorflow" runs the training',
        ),
        (
            lambda r: r.pop("template"),
            "spec.replicaSpecs: Required value: ",
            "a pod template for the replicas is required",
        ),
        (
            lambda r: r.update(template={"metadata": {"labels": {"a": "b"}}}),
            "spec.replicaSpecs: Required value: ",
            "a pod template with spec.containers is required",
        ),
    ],
    ids=["main container without image", "no main container", "no template", "no pod spec"],
)
def test_cel_rules_say_which_case_of_the_pod_template_rules_failed(
    cluster: Cluster, crds: None, namespace: str, change: Any, field: str, message: str
) -> None:
    job = tf_job(f"template-{abs(hash(message)) % 10000}")
    change(job["spec"]["replicaSpecs"][0])
    done = create(cluster, namespace, job)
    assert done.returncode != 0
    assert field + message in done.stderr


def test_cel_rules_refuse_an_xgboost_job_without_a_master(
    cluster: Cluster, crds: None, namespace: str
) -> None:
    job = yaml.safe_load((ROOT / "examples" / "xgboost-iris.yaml").read_text())
    job["spec"]["replicaSpecs"] = job["spec"]["replicaSpecs"][1:]
    done = create(cluster, namespace, job)
    assert done.returncode != 0
    assert 'a replica spec of type "master" with 1 replica is required' in done.stderr


def test_the_server_defaults_and_keeps_resume_specs_and_replica_counts_immutable(
    cluster: Cluster, crds: None, namespace: str
) -> None:
    job = tf_job("pausable", runMode={"pause": {"enabled": False}})
    del job["spec"]["replicaSpecs"][0]["restartPolicy"]
    assert create(cluster, namespace, job).returncode == 0
    got = json.loads(kubectl(cluster, "get", "-n", namespace, "tfj/pausable", "-o", "json").stdout)
    assert got["spec"]["replicaSpecs"][0]["restartPolicy"] == "Never"

    add = {"spec": {"runMode": {"pause": {"resumeSpecs": [{"type": "worker"}]}}}}
    done = kubectl(
        cluster, "patch", "-n", namespace, "tfj/pausable", "--type=merge", "-p", json.dumps(add)
    )
    assert done.returncode != 0
    assert f"spec: Forbidden: {update.RESUME_IMMUTABLE_DETAIL}" in done.stderr

    scale = [{"op": "replace", "path": "/spec/replicaSpecs/0/replicas", "value": 8}]
    done = kubectl(
        cluster, "patch", "-n", namespace, "tfj/pausable", "--type=json", "-p", json.dumps(scale)
    )
    assert done.returncode != 0
    assert f"spec.replicaSpecs[0].replicas: Forbidden: {update.IMMUTABLE_DETAIL}" in done.stderr

    toggle = {"spec": {"runMode": {"pause": {"enabled": True}}}}
    done = kubectl(
        cluster, "patch", "-n", namespace, "tfj/pausable", "--type=merge", "-p", json.dumps(toggle)
    )
    assert done.returncode == 0, done.stderr


def test_kubectl_get_uses_the_short_name_and_printer_columns(
    cluster: Cluster, crds: None, namespace: str
) -> None:
    assert create(cluster, namespace, tf_job("listed")).returncode == 0
    done = kubectl(cluster, "get", "-n", namespace, "tfj")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert row.split()[0] == "listed"


def test_client_side_apply_of_a_crd_is_refused_for_its_last_applied_annotation(
    cluster: Cluster, crds: None
) -> None:
    # Why the docs say `--server-side`: the annotation would hold the whole ~490 KB CRD.
    done = kubectl(
        cluster,
        "apply",
        "-f",
        str(ROOT / "deploy" / "crds" / "batch.tensorstack.dev_xgboosttrainingjobs.yaml"),
    )
    assert done.returncode != 0
    assert "Too long: may not be more than 262144 bytes" in done.stderr
