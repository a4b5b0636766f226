"""What the server serves: the built-in resources and the resources CRDs define.

Every route, discovery document, OpenAPI document and table goes through a `ResourceInfo` from
here. Built-ins are a fixed table (the subset of Kubernetes trainops and its clients need);
CRD-defined resources are derived from the established CRDs in storage and rebuilt whenever a
CRD changes, so a new group shows up in discovery as soon as its CRD is established.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from localcluster.api.reviews import REVIEWS
from localcluster.api.types import PrinterColumn, ResourceInfo

__all__ = [
    "BUILTINS",
    "CRD_RESOURCE",
    "NAMESPACES",
    "Registry",
    "crd_infos",
    "crd_status",
    "resource_id",
    "storage_version",
]

_NO_COLLECTION = ("create", "delete", "get", "list", "patch", "update", "watch")


def _core(kind: str, plural: str, *, namespaced: bool = True, **kw: Any) -> ResourceInfo:
    return ResourceInfo("", "v1", kind, plural, kind.lower(), namespaced, f"{kind}List", **kw)


NAMESPACES = _core(
    "Namespace",
    "namespaces",
    namespaced=False,
    short_names=("ns",),
    verbs=_NO_COLLECTION,
    subresources=("status", "finalize"),
)
CRD_RESOURCE = ResourceInfo(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    "customresourcedefinition",
    False,
    "CustomResourceDefinitionList",
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    subresources=("status",),
)

BUILTINS: tuple[ResourceInfo, ...] = (
    NAMESPACES,
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "log", "binding", "exec", "attach", "portforward"),
    ),
    _core(
        "Service", "services", short_names=("svc",), categories=("all",), subresources=("status",)
    ),
    _core("Endpoints", "endpoints", short_names=("ep",)),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    # Stored and watched, not enforced: the job controller watches quotas to retry creates a
    # quota refused (on a real API server); the embedded one admits whatever they say.
    _core("ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    _core("Secret", "secrets"),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",)),
    _core("Node", "nodes", namespaced=False, short_names=("no",), subresources=("status",)),
    _core("Event", "events", short_names=("ev",)),
    ResourceInfo(
        "events.k8s.io", "v1", "Event", "events", "event", True, "EventList", short_names=("ev",)
    ),
    ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", "lease", True, "LeaseList"),
    ResourceInfo(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        True,
        "DeploymentList",
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    ResourceInfo(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        "replicaset",
        True,
        "ReplicaSetList",
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    CRD_RESOURCE,
    ResourceInfo(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        False,
        "MutatingWebhookConfigurationList",
        categories=("api-extensions",),
    ),
    ResourceInfo(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        False,
        "ValidatingWebhookConfigurationList",
        categories=("api-extensions",),
    ),
    # Stored only, never enforced (the embedded server has no CEL authorizer and no RBAC):
    # deploy/gitops's policy on who may name a ServiceAccount can be applied here.
    ResourceInfo(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        False,
        "ValidatingAdmissionPolicyList",
        categories=("api-extensions",),
        subresources=("status",),
    ),
    ResourceInfo(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        False,
        "ValidatingAdmissionPolicyBindingList",
        categories=("api-extensions",),
    ),
    # Stored only, never enforced: `kubectl apply -k deploy/` can be rehearsed here, but every
    # request is still allowed and no eviction consults a PodDisruptionBudget.
    *(
        ResourceInfo(
            "rbac.authorization.k8s.io",
            "v1",
            kind,
            f"{kind.lower()}s",
            kind.lower(),
            kind.startswith("Role"),
            f"{kind}List",
        )
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ),
    ResourceInfo(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        True,
        "PodDisruptionBudgetList",
        short_names=("pdb",),
        subresources=("status",),
    ),
    # Stored only, never enforced either (there is no pod network to police): deploy/gitops
    # holds one.
    ResourceInfo(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
        True,
        "NetworkPolicyList",
        short_names=("netpol",),
    ),
)

# Kinds whose metadata.generation the real server maintains (it bumps on spec changes).
GENERATION_KINDS = frozenset(
    {
        "apps/deployments",
        "apps/replicasets",
        "apiextensions.k8s.io/customresourcedefinitions",
        "admissionregistration.k8s.io/mutatingwebhookconfigurations",
        "admissionregistration.k8s.io/validatingwebhookconfigurations",
        "admissionregistration.k8s.io/validatingadmissionpolicies",
        "admissionregistration.k8s.io/validatingadmissionpolicybindings",
        "policy/poddisruptionbudgets",
        "networking.k8s.io/networkpolicies",
    }
)


def resource_id(info: ResourceInfo) -> str:
    """The storage identity of a resource: `group/plural` (the same for all its versions)."""
    return f"{info.group}/{info.plural}"


def storage_version(crd: dict[str, Any]) -> str:
    for v in (crd.get("spec") or {}).get("versions") or ():
        if v.get("storage"):
            return str(v.get("name"))
    return ""


def crd_infos(crd: dict[str, Any]) -> list[ResourceInfo]:
    """One ResourceInfo per served version of a CRD (empty for a malformed CRD)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    kind, plural, group = names.get("kind"), names.get("plural"), spec.get("group")
    if not (kind and plural and group):
        return []
    out = []
    for version in spec.get("versions") or ():
        if not version.get("served", False) or not version.get("name"):
            continue
        subs = version.get("subresources") or {}
        columns = tuple(
            PrinterColumn(
                name=c.get("name", ""),
                type=c.get("type", "string"),
                json_path=c.get("jsonPath", ""),
                description=c.get("description", ""),
                priority=int(c.get("priority", 0) or 0),
                format=c.get("format", ""),
            )
            for c in version.get("additionalPrinterColumns") or ()
        )
        out.append(
            ResourceInfo(
                group=group,
                version=version["name"],
                kind=kind,
                plural=plural,
                singular=names.get("singular") or kind.lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                list_kind=names.get("listKind") or f"{kind}List",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=tuple(s for s in ("status", "scale") if s in subs),
                printer_columns=columns,
                crd_version=version,
                crd=crd,
            )
        )
    return out


def crd_status(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the API server's CRD controllers give an accepted, established CRD."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    old = crd.get("status") or {}
    old_conditions = {c.get("type"): c for c in old.get("conditions") or ()}

    def condition(typ: str, reason: str, message: str) -> dict[str, Any]:
        prev = old_conditions.get(typ)
        since = prev["lastTransitionTime"] if prev and prev.get("status") == "True" else now
        return {
            "type": typ,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    stored = list(old.get("storedVersions") or [])
    if (sv := storage_version(crd)) and sv not in stored:
        stored.append(sv)
    return {
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition(
                "Established", "InitialNamesAccepted", "the initial names have been accepted"
            ),
        ],
        "acceptedNames": names,
        "storedVersions": stored,
    }


def _established(crd: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or ()
    )


class Registry:
    """Lookup of served resources by URL parts, by kind, and for discovery."""

    def __init__(self) -> None:
        self._custom: tuple[ResourceInfo, ...] = ()
        self._index: dict[tuple[str, str, str], ResourceInfo] = {}
        self._kinds: dict[tuple[str, str], ResourceInfo] = {}
        self._rebuild()

    def set_crds(self, crds: Iterable[dict[str, Any]]) -> None:
        """Serve the resources of every established CRD (those being deleted stay served)."""
        infos: list[ResourceInfo] = []
        for crd in sorted(crds, key=lambda c: c["metadata"]["name"]):
            try:
                if _established(crd):
                    infos.extend(crd_infos(crd))
            except (AttributeError, TypeError, KeyError):
                continue  # a malformed stored CRD serves nothing rather than breaking the rest
        self._custom = tuple(infos)
        self._rebuild()

    def _rebuild(self) -> None:
        self._index = {(i.group, i.version, i.plural): i for i in self.all()}
        self._kinds = {}
        for info in self.all():
            self._kinds.setdefault((info.api_version, info.kind), info)

    def all(self) -> list[ResourceInfo]:
        return [*BUILTINS, *REVIEWS, *self._custom]

    def custom(self) -> tuple[ResourceInfo, ...]:
        return self._custom

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._index.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceInfo | None:
        return self._kinds.get((api_version, kind))

    def by_resource_id(self, rid: str) -> ResourceInfo | None:
        """The preferred (first served) version of the resource stored as `rid`."""
        group, _, plural = rid.partition("/")
        for info in self.all():
            if info.group == group and info.plural == plural:
                return info
        return None

    def group_versions(self) -> list[tuple[str, list[str]]]:
        """(group, versions in preference order) for every non-core group, in serving order."""
        out: dict[str, list[str]] = {}
        for info in self.all():
            if info.group:
                versions = out.setdefault(info.group, [])
                if info.version not in versions:
                    versions.append(info.version)
        for group, versions in out.items():
            crd_versions = [i for i in self._custom if i.group == group]
            if crd_versions:
                versions.sort(key=_version_priority)
            out[group] = versions
        return list(out.items())

    def in_group_version(self, group: str, version: str) -> list[ResourceInfo]:
        return [i for i in self.all() if i.group == group and i.version == version]


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first, others last."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)
