"""`kubectl apply --server-side -k deploy` installs the generated CRDs and the webhook together."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_the_top_level_kustomization_renders_the_crds_and_the_webhook() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot render the kustomization")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "deploy")], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted({d["kind"] for d in docs})
    assert "MutatingWebhookConfiguration" in kinds
    assert "ValidatingWebhookConfiguration" in kinds
    crds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert set(crds) == {
        "tensorflowtrainingjobs.batch.tensorstack.dev",
        "xgboosttrainingjobs.batch.tensorstack.dev",
    }
    for name, crd in crds.items():
        committed = yaml.safe_load(
            (
                ROOT / "deploy" / "crds" / f"batch.tensorstack.dev_{name.split('.')[0]}.yaml"
            ).read_text()
        )
        assert crd["spec"] == committed["spec"]
