"""Builders for training-job dicts: small valid jobs that a test then breaks in one place.

Every builder returns a fresh, valid, *undefaulted* object; tests change exactly the field
they are about, so a failing case names one rule.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "batch.tensorstack.dev/v1beta1"
MAIN_CONTAINER = {"TensorFlowTrainingJob": "tensorflow", "XGBoostTrainingJob": "xgboost"}


def container(
    name: str = "tensorflow",
    image: str = "tensorflow/tensorflow:2.11.0",
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image, **extra}
    if requests is not None or limits is not None:
        out["resources"] = {}
        if requests is not None:
            out["resources"]["requests"] = requests
        if limits is not None:
            out["resources"]["limits"] = limits
    return out


def replica(
    rtype: str,
    replicas: int | None = 1,
    *,
    main: str = "tensorflow",
    containers: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One replica spec whose pod runs the main container with small resources."""
    if containers is None:
        containers = [
            container(main, limits={"cpu": "1", "memory": "2Gi"}, requests={"cpu": "500m"})
        ]
    out: dict[str, Any] = {"type": rtype, "template": {"spec": {"containers": containers}}}
    if replicas is not None:
        out["replicas"] = replicas
    out.update(extra)
    return out


def tf_job(*replicas: dict[str, Any], name: str = "mnist", **spec: Any) -> dict[str, Any]:
    """A TensorFlowTrainingJob; by default one chief and two workers."""
    specs = list(replicas) or [replica("chief"), replica("worker", 2)]
    return {
        "apiVersion": API_VERSION,
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"replicaSpecs": specs, **spec},
    }


def xgb_job(*replicas: dict[str, Any], name: str = "iris", **spec: Any) -> dict[str, Any]:
    """An XGBoostTrainingJob; by default one master and two workers."""
    specs = list(replicas) or [
        replica("master", main="xgboost"),
        replica("worker", 2, main="xgboost"),
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "XGBoostTrainingJob",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"replicaSpecs": specs, **spec},
    }


def all_types_tf_job(name: str = "bench") -> dict[str, Any]:
    """Chief, four workers, two parameter servers and an evaluator (the benchmark job)."""
    return tf_job(
        replica("chief"),
        replica("worker", 4),
        replica("ps", 2),
        replica("evaluator"),
        name=name,
    )
