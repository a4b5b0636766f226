"""What the client needs to know about a resource type to build its URLs, and nothing more.

The client speaks plain dicts, so the only per-type knowledge it needs is where a type lives:
group, version, plural, and whether it is namespaced. A `Resource` is that value; the constants
below are the types this project reads and writes (discovery is not needed for them, and
`for_kind` maps an object's apiVersion/kind back to one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "DEPLOYMENTS",
    "EVENTS",
    "JOB_DEADLINE_FIELD",
    "LEASES",
    "MUTATING_WEBHOOK_CONFIGURATIONS",
    "NAMESPACES",
    "NODES",
    "PODS",
    "REPLICASETS",
    "RESOURCEQUOTAS",
    "SECRETS",
    "SELF_SUBJECT_ACCESS_REVIEWS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "SUBJECT_ACCESS_REVIEWS",
    "TFJOBS",
    "TOKEN_REVIEWS",
    "VALIDATING_WEBHOOK_CONFIGURATIONS",
    "XGBJOBS",
    "Resource",
    "cached_training_job",
    "for_kind",
    "key_of",
    "name_problem",
]


@dataclass(frozen=True)
class Resource:
    """A resource type: `group` is "" for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        """`/api/v1` or `/apis/<group>/<version>`."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The list/create/watch URL: namespaced when the type is and `namespace` is given
        (no namespace on a namespaced type means all namespaces)."""
        if self.namespaced and namespace:
            return f"{self.base_path}/namespaces/{_seg(namespace)}/{self.plural}"
        return f"{self.base_path}/{self.plural}"

    def object_path(
        self, name: str, namespace: str | None = None, subresource: str | None = None
    ) -> str:
        """One object's URL (or its subresource's: `status`, `binding`, `log`, …)."""
        if not name:
            raise ValueError(f"{self.kind}: a name is required")
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name}: a namespace is required")
        path = f"{self.collection_path(namespace)}/{_seg(name)}"
        return f"{path}/{subresource}" if subresource else path


PODS = Resource("", "v1", "pods", "Pod", True)
SERVICES = Resource("", "v1", "services", "Service", True)
EVENTS = Resource("", "v1", "events", "Event", True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
RESOURCEQUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
NODES = Resource("", "v1", "nodes", "Node", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
TFJOBS = Resource(
    "batch.tensorstack.dev", "v1beta1", "tensorflowtrainingjobs", "TensorFlowTrainingJob", True
)
XGBJOBS = Resource(
    "batch.tensorstack.dev", "v1beta1", "xgboosttrainingjobs", "XGBoostTrainingJob", True
)

JOB_DEADLINE_FIELD = ("f:spec", "f:runPolicy", "f:activeDeadlineSeconds")
"""The one field of a training job whose managedFields entries a reader needs: when it was
written (the controller's deadline settle time, controller/lifecycle.py)."""


def cached_training_job(obj: dict[str, Any]) -> dict[str, Any]:
    """A training job as a process's one cache keeps it (the controller and GitOps share it, so
    both ask for this transform): `metadata.managedFields` reduced to the entries that wrote
    `spec.runPolicy.activeDeadlineSeconds`, each with only that field (changed in place: it was
    just decoded). The rest of the managed fields — a third of a job's JSON — nobody reads."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    kept = []
    for entry in meta.get("managedFields") or []:
        if not isinstance(entry, dict):
            continue
        node: Any = entry.get("fieldsV1")
        for name in JOB_DEADLINE_FIELD:
            node = node.get(name) if isinstance(node, dict) else None
        if node is None:
            continue
        compact: dict[str, Any] = {}
        for name in reversed(JOB_DEADLINE_FIELD):
            compact = {name: compact}
        kept.append({**{k: v for k, v in entry.items() if k != "fieldsV1"}, "fieldsV1": compact})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields")
    return obj


TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
"""Whose is a bearer token (POST only: answered, never stored)."""
SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False
)
"""May I (the client's identity, or whom it impersonates) do a verb on a resource (POST only)."""

SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
"""May a user (with groups and extra) do a verb on a resource (POST only)."""

_KNOWN = {
    (r.api_version, r.kind): r
    for r in (
        PODS,
        SERVICES,
        EVENTS,
        CONFIGMAPS,
        SECRETS,
        NAMESPACES,
        NODES,
        LEASES,
        DEPLOYMENTS,
        REPLICASETS,
        CRDS,
        MUTATING_WEBHOOK_CONFIGURATIONS,
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        TFJOBS,
        XGBJOBS,
    )
}


def for_kind(api_version: str, kind: str) -> Resource:
    """The known `Resource` of an object's apiVersion and kind; KeyError for unknown ones."""
    try:
        return _KNOWN[(api_version, kind)]
    except KeyError:
        raise KeyError(f"unknown resource type {api_version} {kind}") from None


def key_of(obj: dict[str, Any]) -> str:
    """The cache and work-queue key of an object: `namespace/name`, or `name` when it has no
    namespace (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def name_problem(name: str) -> str | None:
    """Why `name` cannot be an object's name or namespace in a URL, else None: the API server's
    rule for a path segment (apimachinery's `IsValidPathSegmentName`). `.` and `..` would
    otherwise be resolved by the HTTP client as a path step: `DELETE …/tensorflowtrainingjobs/.`
    becomes a DELETE of the whole collection, `…/pods/..` a GET of the namespace."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is not a name"
    for bad in ("/", "%"):
        if bad in name:
            return f"a name may not contain {bad!r}"
    return None


def _seg(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"invalid name or namespace {value!r} in a URL: {problem}")
    return quote(value, safe="")
