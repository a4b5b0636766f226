"""Which kinds a manifest may have: one classification for `trainops check` and the GitOps
sources, so both say the same thing about a typo'd kind.

A document's `(group, kind)` falls in exactly one class:

- `TRAINING_JOB`: a TensorFlowTrainingJob or XGBoostTrainingJob of `batch.tensorstack.dev` (any
  version: a wrong version is the admission rules' business, which name the supported one);
- `KNOWN`: a built-in kind commonly kept in Git (`KNOWN_KINDS`), or a JobRepository;
- `INVALID`: certainly a mistake, with the reason and, when one is close, a did-you-mean:
  an unknown kind in one of our groups (`batch.tensorstack.dev`, `gitops.trainops.dev`); a near
  miss of a training-job kind in any group (`TensorflowTrainingJob`); a near miss of a kind of
  the same built-in group (`Configmap` in `v1`); a built-in kind under the wrong built-in group
  (`Deployment` in `v1`);
- `UNKNOWN`: anything else (a third-party CRD's kind, or a built-in kind this table lacks).
  Not necessarily wrong: the cluster may serve it. `trainops check` warns; GitOps sources record
  an entry with an "unknown kind" error and the class, so the sync engine may decide by
  discovery.

Near misses are found with `difflib`, case-insensitively: a kind equal to a known one but for
case is always a near miss.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import policies
from gitops.engine import names

__all__ = [
    "CLUSTER_SCOPED",
    "KNOWN_KINDS",
    "OUR_GROUPS",
    "Classification",
    "KindClass",
    "classify",
    "classify_object",
    "cluster_scoped",
    "group_of",
    "intended",
]


class KindClass(StrEnum):
    TRAINING_JOB = "TrainingJob"
    KNOWN = "Known"
    INVALID = "Invalid"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Classification:
    kind_class: KindClass
    message: str | None = None
    """Why INVALID or UNKNOWN, in the user's terms; None otherwise."""


_CORE = (
    "ConfigMap",
    "Endpoints",
    "LimitRange",
    "Namespace",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodTemplate",
    "ReplicationController",
    "ResourceQuota",
    "Secret",
    "Service",
    "ServiceAccount",
)
KNOWN_KINDS: dict[str, frozenset[str]] = {
    "": frozenset(_CORE),
    "apps": frozenset(
        {"DaemonSet", "Deployment", "ReplicaSet", "StatefulSet", "ControllerRevision"}
    ),
    "batch": frozenset({"CronJob", "Job"}),
    "autoscaling": frozenset({"HorizontalPodAutoscaler"}),
    "policy": frozenset({"PodDisruptionBudget"}),
    "networking.k8s.io": frozenset({"Ingress", "IngressClass", "NetworkPolicy"}),
    "rbac.authorization.k8s.io": frozenset(
        {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    ),
    "apiextensions.k8s.io": frozenset({"CustomResourceDefinition"}),
    "admissionregistration.k8s.io": frozenset(
        {
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        }
    ),
    "scheduling.k8s.io": frozenset({"PriorityClass"}),
    "storage.k8s.io": frozenset({"StorageClass", "CSIDriver", "VolumeAttachment"}),
    "node.k8s.io": frozenset({"RuntimeClass"}),
    "coordination.k8s.io": frozenset({"Lease"}),
    "events.k8s.io": frozenset({"Event"}),
    "discovery.k8s.io": frozenset({"EndpointSlice"}),
    "certificates.k8s.io": frozenset({"CertificateSigningRequest"}),
    "apiregistration.k8s.io": frozenset({"APIService"}),
    "flowcontrol.apiserver.k8s.io": frozenset({"FlowSchema", "PriorityLevelConfiguration"}),
    policies.GROUP: frozenset(policies.KINDS),
    names.GROUP: frozenset({names.KIND}),
}
"""Known kinds by API group ("" is the core group); versions are not checked."""
OUR_GROUPS = frozenset({policies.GROUP, names.GROUP})
_BUILTIN_GROUPS = frozenset(g for g in KNOWN_KINDS if g not in OUR_GROUPS)
_NEAR = 0.85  # difflib ratio for a near miss of a training-job kind from another group
_SAME_GROUP = 0.6  # within the same group a looser match is still the likely intent


CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "ComponentStatus"),
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("networking.k8s.io", "IngressClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "VolumeAttachment"),
    }
)
"""The built-in cluster-scoped kinds by (group, kind): the one table pairing, compare and
tenancy use where discovery has not said (`cluster_scoped`); any other kind is namespaced."""


def cluster_scoped(scopes: Mapping[tuple[str, str], bool]) -> frozenset[tuple[str, str]]:
    """The cluster-scoped (group, kind)s: discovery's answer where it gave one (`scopes` maps
    (apiVersion, kind) to namespaced-or-not), the built-in table elsewhere. A CRD of either
    scope is judged by what the server says of it."""
    namespaced = {(group_of(v), k) for (v, k), is_namespaced in scopes.items() if is_namespaced}
    cluster = {(group_of(v), k) for (v, k), is_namespaced in scopes.items() if not is_namespaced}
    return frozenset((CLUSTER_SCOPED - namespaced) | cluster)


def group_of(api_version: str) -> str:
    """`apps/v1` → `apps`; `v1` → `` (the core group)."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def classify(api_version: str, kind: str) -> Classification:
    """The class of `kind` in `api_version`, with a message for INVALID and UNKNOWN."""
    group = group_of(api_version)
    if group == policies.GROUP and kind in policies.KINDS:
        return Classification(KindClass.TRAINING_JOB)
    if kind in KNOWN_KINDS.get(group, ()):
        return Classification(KindClass.KNOWN)
    unknown = f'unknown kind "{kind}" in {api_version}'
    if group in OUR_GROUPS:
        match = _closest(kind, KNOWN_KINDS[group], _NEAR)
        if match is None:
            known = ", ".join(sorted(KNOWN_KINDS[group]))
            return Classification(KindClass.INVALID, f"{unknown} (its kinds: {known})")
        return Classification(KindClass.INVALID, unknown + _did_you_mean(match, api_version))
    match = _closest(kind, policies.KINDS, _NEAR)
    if match is not None:
        hint = _did_you_mean(match, policies.API_VERSION, other_group=group != policies.GROUP)
        return Classification(KindClass.INVALID, unknown + hint)
    if group in _BUILTIN_GROUPS:
        elsewhere = [g for g in sorted(KNOWN_KINDS) if kind in KNOWN_KINDS[g]]
        if elsewhere:
            where = _api_group_name(elsewhere[0])
            return Classification(
                KindClass.INVALID, f"{unknown}: {kind} belongs to the API group {where}"
            )
        match = _closest(kind, KNOWN_KINDS[group], _SAME_GROUP)
        if match is not None:
            return Classification(KindClass.INVALID, unknown + _did_you_mean(match, api_version))
    return Classification(KindClass.UNKNOWN, unknown)


def intended(api_version: str, kind: str) -> tuple[str, str] | None:
    """The (group, kind) an INVALID kind most likely meant (its did-you-mean), else None."""
    group = group_of(api_version)
    if group in OUR_GROUPS:
        match = _closest(kind, KNOWN_KINDS[group], _NEAR)
        return (group, match) if match else None
    match = _closest(kind, policies.KINDS, _NEAR)
    if match is not None:
        return (policies.GROUP, match)
    if group in _BUILTIN_GROUPS:
        elsewhere = [g for g in sorted(KNOWN_KINDS) if kind in KNOWN_KINDS[g]]
        if elsewhere:
            return (elsewhere[0], kind)
        match = _closest(kind, KNOWN_KINDS[group], _SAME_GROUP)
        if match is not None:
            return (group, match)
    return None


def classify_object(obj: object) -> Classification | None:
    """`classify` for a manifest with string `apiVersion` and `kind`; None when it lacks them."""
    if not isinstance(obj, dict):
        return None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return None
    return classify(api_version, kind)


def _closest(kind: str, candidates: frozenset[str] | tuple[str, ...], cutoff: float) -> str | None:
    by_lower = {c.lower(): c for c in candidates}
    if kind.lower() in by_lower:
        return by_lower[kind.lower()]
    found = difflib.get_close_matches(kind.lower(), sorted(by_lower), n=1, cutoff=cutoff)
    return by_lower[found[0]] if found else None


def _did_you_mean(match: str | None, api_version: str, *, other_group: bool = False) -> str:
    if match is None:
        return ""
    if other_group:
        return f': did you mean "{match}" (apiVersion: {api_version})?'
    return f': did you mean "{match}"?'


def _api_group_name(group: str) -> str:
    return f'"{group}"' if group else "core (apiVersion: v1)"
