"""Defaulting and status rules of the built-in kinds (what their registry strategies do).

Pure functions over private copies. Only the defaults that clients visibly rely on are applied:
`kubectl get` columns, `kubectl apply` diffs, controllers reading `status.phase`. The full set
of Kubernetes defaults is larger; docs/LOCALCLUSTER.md lists what is covered.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from localcluster.api.registry import resource_id
from localcluster.api.types import ResourceInfo

__all__ = [
    "NAMESPACE_LABEL",
    "carry_over",
    "default_object",
    "initial_status",
    "keep_status",
    "pod_spec_defaults",
    "status_only",
]

NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if not isinstance(container, dict):
                continue
            image = str(container.get("image") or "")
            tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
            latest = tagless or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            for port in container.get("ports") or ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def _qos(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "BestEffort"
    containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    requests = [((c.get("resources") or {}).get("requests") or {}) for c in containers]
    limits = [((c.get("resources") or {}).get("limits") or {}) for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get("cpu")
        and lim.get("memory")
        and req.get("cpu", lim["cpu"]) == lim["cpu"]
        and req.get("memory", lim["memory"]) == lim["memory"]
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _cluster_ip(uid: str) -> str:
    """A stable address in 10.96.0.0/16 derived from the uid (collisions are not checked)."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"10.96.{digest[0]}.{2 + digest[1] % 250}"


# ObjectMeta members Go encodes with `omitempty`: an empty one is not stored (so nobody owns
# it either), whatever kind the object is.
_OMIT_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences")


def _null_strings(mapping: Any) -> None:
    """A `null` in a Go `map[string]string` decodes as "" (e.g. a JSON patch's `copy` from a
    missing member into a ConfigMap's data)."""
    if isinstance(mapping, dict):
        for key, value in mapping.items():
            if value is None:
                mapping[key] = ""


def default_object(info: ResourceInfo, obj: dict[str, Any], *, create: bool) -> dict[str, Any]:
    """Apply the kind's defaults to `obj` (a private copy) and return it."""
    rid = resource_id(info)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        _null_strings(meta.get("labels"))
        _null_strings(meta.get("annotations"))
        for key in _OMIT_EMPTY_META:
            if meta.get(key) in ({}, []):
                del meta[key]
    if rid == "/configmaps":
        _null_strings(obj.get("data"))
    spec = obj.get("spec")
    if rid == "/namespaces":
        meta = obj.setdefault("metadata", {})
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        meta["labels"] = {**labels, NAMESPACE_LABEL: meta.get("name", "")}
        if create:
            obj["spec"] = {"finalizers": ["kubernetes"]}
    elif rid == "/pods" and isinstance(spec, dict):
        pod_spec_defaults(spec)
        spec.setdefault("enableServiceLinks", True)  # Pods only: templates keep it unset
        # The ServiceAccount admission plugin's part (pods only, not pod templates).
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
    elif rid == "/services" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if create and not spec.get("clusterIP"):
                spec["clusterIP"] = _cluster_ip(obj["metadata"].get("uid", ""))
            if spec.get("clusterIP"):
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
    elif rid == "apps/deployments" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                strategy.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
        template_spec = (spec.get("template") or {}).get("spec")
        if isinstance(template_spec, dict):
            pod_spec_defaults(template_spec)
    elif rid == "apps/replicasets" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        template_spec = (spec.get("template") or {}).get("spec")
        if isinstance(template_spec, dict):
            pod_spec_defaults(template_spec)
    elif rid == "/secrets":
        obj.setdefault("type", "Opaque")
        # stringData is write-only: merged into data (base64), as the real server does.
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            current = obj.get("data")
            data: dict[str, Any] = current if isinstance(current, dict) else {}
            obj["data"] = {
                **data,
                **{k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()},
            }
    elif rid == "apiextensions.k8s.io/customresourcedefinitions" and isinstance(spec, dict):
        spec.setdefault("conversion", {"strategy": "None"})
    return obj


def initial_status(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """The status a new object starts with (create ignores a client-sent status)."""
    rid = resource_id(info)
    if rid == "/namespaces":
        obj["status"] = {"phase": "Active"}
    elif rid == "/pods":
        obj["status"] = {"phase": "Pending", "qosClass": _qos(obj.get("spec") or {})}
    elif rid == "/services":
        obj["status"] = {"loadBalancer": {}}
    elif rid in ("apps/deployments", "apiextensions.k8s.io/customresourcedefinitions"):
        obj["status"] = {}
    elif rid == "apps/replicasets":
        obj["status"] = {"replicas": 0}
    elif info.is_custom and "status" in info.subresources:
        obj.pop("status", None)
    return obj


def carry_over(info: ResourceInfo, old: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Allocated values an update may leave out (a Service's cluster IPs) come from `old`."""
    if resource_id(info) == "/services":
        spec, old_spec = obj.get("spec"), old.get("spec") or {}
        if isinstance(spec, dict) and not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
            if old_spec.get("clusterIPs"):
                spec["clusterIPs"] = old_spec["clusterIPs"]
    return obj


def keep_status(info: ResourceInfo, old: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Main-endpoint update of a kind with a status subresource: the old status stays."""
    if "status" in info.subresources:
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
    return obj


def status_only(old: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """`/status` update: everything but status (and managedFields) comes from `old`."""
    new = {k: v for k, v in old.items() if k != "status"}
    if "status" in obj:
        new["status"] = obj["status"]
    meta = dict(old.get("metadata") or {})
    new_meta = obj.get("metadata") or {}
    if "managedFields" in new_meta:
        meta["managedFields"] = new_meta["managedFields"]
    if "resourceVersion" in new_meta:
        meta["resourceVersion"] = new_meta["resourceVersion"]
    new["metadata"] = meta
    return new
