"""The order objects are applied in (pure): namespaces, then CRDs, then what pods read
(service accounts, config, secrets, storage, RBAC), then services and workloads, then
everything else — custom resources such as training jobs last, once their CRD and everything
their pods mount exist. Pruning goes in reverse. Ties are broken by key.

Waves: objects of the same place in the order do not depend on each other, so each wave
(`apply_waves`) may be applied at once, after the wave before it is done.

As gitops-engine's `kindOrder` (pkg/sync/sync_tasks.go), a table, not code; CRDs move up to
just after namespaces (Argo CD gets the same effect by putting unknown kinds last).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from gitops.engine import kinds
from gitops.engine.pairing import ResourceKey

__all__ = ["KIND_ORDER", "apply_order", "apply_waves", "prune_order", "prune_waves", "sort_key"]

KIND_ORDER: tuple[str, ...] = (
    "Namespace",
    "CustomResourceDefinition",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "PriorityClass",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
)
_RANK = {kind: i for i, kind in enumerate(KIND_ORDER)}
T = TypeVar("T")


def sort_key(key: ResourceKey) -> tuple[int, ResourceKey]:
    """Kinds of the table (in a Kubernetes API group) by their place, then every other kind
    (custom resources: a knative `Service` is not a Service), each by key."""
    builtin = key.group in kinds.KNOWN_KINDS and key.group not in kinds.OUR_GROUPS
    return (_RANK.get(key.kind, len(KIND_ORDER)) if builtin else len(KIND_ORDER), key)


def apply_order(items: Iterable[T], key: Callable[[T], ResourceKey]) -> list[T]:
    """`items` in apply order."""
    return sorted(items, key=lambda item: sort_key(key(item)))


def prune_order(items: Iterable[T], key: Callable[[T], ResourceKey]) -> list[T]:
    """`items` in delete order: the reverse of apply order."""
    return sorted(items, key=lambda item: sort_key(key(item)), reverse=True)


def apply_waves(items: Iterable[T], key: Callable[[T], ResourceKey]) -> list[list[T]]:
    """`items` in apply order, grouped by their place in it (each group by key)."""
    out: list[list[T]] = []
    last: int | None = None
    for item in apply_order(items, key):
        rank = sort_key(key(item))[0]
        if rank != last:
            out.append([])
            last = rank
        out[-1].append(item)
    return out


def prune_waves(items: Iterable[T], key: Callable[[T], ResourceKey]) -> list[list[T]]:
    """`items` in delete order, grouped as `apply_waves` groups them (the reverse)."""
    return [wave[::-1] for wave in reversed(apply_waves(items, key))]
