"""AdmissionReviews shaped exactly as the API server sends them, and the example jobs."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_RESOURCES = {
    "TensorFlowTrainingJob": "tensorflowtrainingjobs",
    "XGBoostTrainingJob": "xgboosttrainingjobs",
}


def example(name: str) -> dict[str, Any]:
    """An example job from examples/ (e.g. `tensorflow-mnist`, `denied/no-main-container`)."""
    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    dry_run: bool = False,
    api_version: str = "admission.k8s.io/v1",
    namespace: str = "team-a",
) -> dict[str, Any]:
    """The AdmissionReview an API server posts for `operation` on `obj` (or `old` on DELETE)."""
    subject = obj if obj is not None else old
    assert subject is not None
    api_group_version = str(subject.get("apiVersion", "v1"))
    group, _, version = api_group_version.rpartition("/")
    kind = str(subject.get("kind", ""))
    resource = _RESOURCES.get(kind, kind.lower() + "s")
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    name = subject.get("metadata", {}).get("name", "")
    options: dict[str, Any] = {
        "CREATE": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "CreateOptions",
            "fieldManager": "kubectl-client-side-apply",
            "fieldValidation": "Strict",
        },
        "UPDATE": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "UpdateOptions",
            "fieldManager": "kubectl-client-side-apply",
            "fieldValidation": "Strict",
        },
        "DELETE": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        },
        "CONNECT": None,
    }[operation]
    if dry_run and options is not None:
        options["dryRun"] = ["All"]

    def stored(o: dict[str, Any] | None) -> dict[str, Any] | None:
        if o is None:
            return None
        o = copy.deepcopy(o)
        o.setdefault("metadata", {}).setdefault("namespace", namespace)
        return o

    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {
                "username": "kubernetes-admin",
                "groups": ["kubeadm:cluster-admins", "system:authenticated"],
            },
            "object": stored(obj),
            "oldObject": stored(old),
            "dryRun": dry_run,
            "options": options,
        },
    }
