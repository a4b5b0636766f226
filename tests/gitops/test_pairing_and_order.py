"""Pairing desired with live by ResourceKey, and the apply order."""

from __future__ import annotations

from typing import Any

import pytest

from gitops.engine.order import apply_order, apply_waves, prune_order, prune_waves
from gitops.engine.pairing import DuplicateResourceError, ResourceKey, key_of, pair


def obj(api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


KEYS = {
    "a namespaced object without a namespace goes to the destination": (
        obj("v1", "ConfigMap", "c"),
        ResourceKey("", "ConfigMap", "dest", "c"),
    ),
    "an explicit namespace is kept": (
        obj("v1", "ConfigMap", "c", "other"),
        ResourceKey("", "ConfigMap", "other", "c"),
    ),
    "a cluster-scoped kind has no namespace even if given one": (
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "r", "dest"),
        ResourceKey("rbac.authorization.k8s.io", "ClusterRole", "", "r"),
    ),
    "a training job keys by its group": (
        obj("batch.tensorstack.dev/v1beta1", "TensorFlowTrainingJob", "j"),
        ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "dest", "j"),
    ),
}


@pytest.mark.parametrize(("o", "key"), KEYS.values(), ids=KEYS.keys())
def test_key_of(o: dict[str, Any], key: ResourceKey) -> None:
    assert key_of(o, "dest") == key


def test_pair_aligns_both_sides_sorted_with_none_for_the_missing_side() -> None:
    desired = [obj("v1", "Secret", "s"), obj("v1", "ConfigMap", "c")]
    live = [obj("v1", "ConfigMap", "c", "dest"), obj("v1", "ConfigMap", "old", "dest")]
    pairs = pair(desired, live, namespace="dest")
    assert [(str(p.key), p.desired is not None, p.live is not None) for p in pairs] == [
        ("ConfigMap dest/c", True, True),
        ("ConfigMap dest/old", False, True),
        ("Secret dest/s", True, False),
    ]


def test_the_version_is_not_part_of_the_key() -> None:
    pairs = pair(
        [obj("apps/v1", "Deployment", "d")],
        [obj("apps/v1beta2", "Deployment", "d", "n")],
        namespace="n",
    )
    assert len(pairs) == 1 and pairs[0].desired and pairs[0].live


def test_a_resource_defined_twice_is_refused() -> None:
    with pytest.raises(DuplicateResourceError, match="ConfigMap n/c"):
        pair([obj("v1", "ConfigMap", "c"), obj("v1", "ConfigMap", "c", "n")], [], namespace="n")


def test_namespaces_then_crds_then_config_then_workloads_then_custom_resources() -> None:
    keys = [
        ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "n", "a"),
        ResourceKey("apps", "Deployment", "n", "a"),
        ResourceKey("", "ConfigMap", "n", "b"),
        ResourceKey("", "ConfigMap", "n", "a"),
        ResourceKey("serving.knative.dev", "Service", "n", "a"),
        ResourceKey("apiextensions.k8s.io", "CustomResourceDefinition", "", "x"),
        ResourceKey("", "ServiceAccount", "n", "a"),
        ResourceKey("", "Namespace", "", "n"),
    ]
    ordered = apply_order(keys, key=lambda k: k)
    assert [k.kind for k in ordered] == [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ConfigMap",
        "ConfigMap",
        "Deployment",
        "TensorFlowTrainingJob",
        "Service",
    ]
    assert [k.name for k in ordered[3:5]] == ["a", "b"]
    assert prune_order(keys, key=lambda k: k) == list(reversed(ordered))


def _k(group: str, kind: str, name: str) -> ResourceKey:
    return ResourceKey(group, kind, "team-a", name)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param([], [], id="nothing"),
        pytest.param(
            [
                _k("batch.tensorstack.dev", "TensorFlowTrainingJob", "b"),
                _k("", "ConfigMap", "z"),
                _k("batch.tensorstack.dev", "TensorFlowTrainingJob", "a"),
                _k("", "Namespace", "ns"),
                _k("", "ConfigMap", "y"),
                _k("batch.tensorstack.dev", "XGBoostTrainingJob", "c"),
            ],
            [
                ["ns"],
                ["y", "z"],
                ["a", "b", "c"],  # custom resources: one wave
            ],
            id="one-wave-per-place",
        ),
        pytest.param(
            [_k("", "Secret", "s"), _k("", "ConfigMap", "c"), _k("apps", "Deployment", "d")],
            [["s"], ["c"], ["d"]],
            id="adjacent-kinds-stay-apart",
        ),
    ],
)
def test_apply_waves_group_the_apply_order_by_place(
    keys: list[ResourceKey], expected: list[list[str]]
) -> None:
    waves = apply_waves(keys, lambda k: k)
    assert [[k.name for k in wave] for wave in waves] == expected
    assert [k for wave in waves for k in wave] == apply_order(keys, lambda k: k)
    pruned = prune_waves(keys, lambda k: k)
    assert [k for wave in pruned for k in wave] == prune_order(keys, lambda k: k)
