"""The CustomResourceDefinitions of both training-job kinds, as data (pure).

Generated, never edited: the schema comes from `policies.schema` (our fields plus the derived
PodTemplateSpec) with the CEL rules of `policies.cel`, so the cluster, the webhook and `trainops
check` share one definition. `trainops crds` renders them into `deploy/crds/`, and `trainops up`
installs them through the API.

Printer columns: `kubectl get tfj` shows the phase, replicas ready out of all (a string the
controller writes, `status.readyReplicas`, since a JSONPath cannot compute "2/3"), the restarts
counted against `backoffLimit`, and the age.
"""

from __future__ import annotations

from typing import Any

from policies import cel
from policies.job import GROUP, KINDS, VERSION

__all__ = ["build_crd", "build_crds", "file_name"]

_SHORT_NAMES = {"TensorFlowTrainingJob": ["tfj"], "XGBoostTrainingJob": ["xgbj"]}
_CATEGORIES = ["all", "t9k", "trainingjobs"]


def build_crds() -> list[dict[str, Any]]:
    return [build_crd(kind) for kind in KINDS]


def build_crd(kind: str) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CRD of `kind`."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "trainops"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": kind + "List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": _SHORT_NAMES[kind],
                "categories": _CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": "Phase",
                            "type": "string",
                            "description": "The job's phase.",
                            "jsonPath": ".status.phase",
                        },
                        {
                            "name": "Ready",
                            "type": "string",
                            "description": "Replicas ready / replicas in all.",
                            "jsonPath": ".status.readyReplicas",
                        },
                        {
                            "name": "Restarts",
                            "type": "integer",
                            "description": "Replica restarts counted against backoffLimit.",
                            "jsonPath": ".status.backoffCount",
                        },
                        {
                            "name": "Progress",
                            "type": "integer",
                            "description": "Percent done, as the training reports it.",
                            "jsonPath": ".status.progress.percent",
                        },
                        {
                            "name": "ETA",
                            "type": "string",
                            "description": "Time left at the reported step rate.",
                            "jsonPath": ".status.progress.eta",
                        },
                        {
                            "name": "Age",
                            "type": "date",
                            "jsonPath": ".metadata.creationTimestamp",
                        },
                    ],
                    "schema": {"openAPIV3Schema": cel.schema_with_rules(kind)},
                }
            ],
        },
    }


def file_name(crd: dict[str, Any]) -> str:
    """`<group>_<plural>.yaml`, the kubebuilder convention."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"
