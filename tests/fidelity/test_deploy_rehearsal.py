"""`deploy/` can be rehearsed on the embedded server: `kubectl apply -k` of the webhook and
controller kustomizations (after the CRDs) and `kubectl apply --server-side -k deploy` succeed, and the RBAC and PodDisruptionBudget objects it holds are stored and read back as
written (stored only: the embedded server does not enforce RBAC or disruption budgets).

A fresh embedded server of its own: the webhook configurations deploy/ installs would otherwise
send the shared server's training-job writes to a webhook that is not running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import BackgroundApiServer
from tests.support.manifests import REPO

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed"),
    pytest.mark.embedded_only("rehearses deploy/ on the embedded server"),
    pytest.mark.kubectl,
]


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    server = BackgroundApiServer(tmp_path_factory.mktemp("rehearsal"))
    try:
        yield server.server.kubeconfig
    finally:
        server.stop()


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_each_deploy_kustomization_applies_and_its_rbac_reads_back(kubeconfig: Path) -> None:
    crds = _kubectl(kubeconfig, "apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    assert crds.returncode == 0, crds.stderr
    for part in ("webhook", "controller"):
        out = _kubectl(kubeconfig, "apply", "-k", str(REPO / "deploy" / part))
        assert out.returncode == 0, f"kubectl apply -k deploy/{part}: {out.stderr}"
    got = _kubectl(
        kubeconfig,
        "get",
        "roles,rolebindings,poddisruptionbudgets",
        "-n",
        "trainops-system",
        "-o",
        "name",
    )
    assert got.returncode == 0, got.stderr
    assert sorted(got.stdout.split()) == [
        "poddisruptionbudget.policy/trainops-controller",
        "poddisruptionbudget.policy/trainops-webhook",
        "role.rbac.authorization.k8s.io/trainops-controller-leader-election",
        "role.rbac.authorization.k8s.io/trainops-controller-progress",
        "role.rbac.authorization.k8s.io/trainops-webhook-certs",
        "rolebinding.rbac.authorization.k8s.io/trainops-controller-leader-election",
        "rolebinding.rbac.authorization.k8s.io/trainops-controller-progress",
        "rolebinding.rbac.authorization.k8s.io/trainops-webhook-certs",
    ]
    cluster_role = _kubectl(kubeconfig, "get", "clusterrole", "trainops-controller", "-o", "json")
    assert cluster_role.returncode == 0, cluster_role.stderr
    rendered = _kubectl(kubeconfig, "kustomize", str(REPO / "deploy" / "controller"))
    wanted = next(
        d
        for d in yaml.safe_load_all(rendered.stdout)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "trainops-controller"
    )
    assert json.loads(cluster_role.stdout)["rules"] == wanted["rules"]


def test_the_whole_deploy_tree_applies_server_side(kubeconfig: Path) -> None:
    out = _kubectl(
        kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", str(REPO / "deploy")
    )
    assert out.returncode == 0, out.stderr
    assert (
        "clusterrolebinding.rbac.authorization.k8s.io/trainops-controller serverside-applied"
        in (out.stdout)
    )
    assert "poddisruptionbudget.policy/trainops-webhook serverside-applied" in out.stdout
