"""Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>/<version>`.

Pure functions over `ResourceInfo`s. kubectl v1.32 asks for the aggregated discovery format
(`apidiscovery.k8s.io/v2`: every group, version and resource in one document) and falls back to
the classic `APIVersions`/`APIGroupList` + per-group-version `APIResourceList`s. Both are
served: aggregated when the client's Accept header puts it first, classic otherwise.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from localcluster.api.types import ResourceInfo

__all__ = [
    "AGGREGATED_CONTENT_TYPE",
    "KUBERNETES_VERSION",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "version_info",
    "wants_aggregated",
]

KUBERNETES_VERSION = "v1.32.0-trainops"

# Subresource → (kind, group, version, verbs) as the real server lists them.
_SUBRESOURCES: dict[str, tuple[str | None, str | None, str | None, tuple[str, ...]]] = {
    "status": (None, None, None, ("get", "patch", "update")),
    "log": ("Pod", None, None, ("get",)),
    "binding": ("Binding", None, None, ("create",)),
    "scale": ("Scale", "autoscaling", "v1", ("get", "patch", "update")),
    "finalize": (None, None, None, ("update",)),
    "exec": ("PodExecOptions", None, None, ("create", "get")),
    "attach": ("PodAttachOptions", None, None, ("create", "get")),
    "portforward": ("PodPortForwardOptions", None, None, ("create", "get")),
}


def version_info(*, platform: str = "linux/amd64") -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": platform,
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """`GET /api`."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(group: str, versions: Sequence[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(groups: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
    """`GET /apis`: `groups` as (name, versions in preference order)."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [api_group(g, vs) for g, vs in groups if vs],
    }


def _hash(info: ResourceInfo) -> str:
    digest = hashlib.sha256(f"{info.group}/{info.version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource_list(group_version: str, infos: Sequence[ResourceInfo]) -> dict[str, Any]:
    """`GET /api/v1` or `/apis/<g>/<v>`: resources, then their subresources."""
    resources: list[dict[str, Any]] = []
    for info in infos:
        entry: dict[str, Any] = {
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(info.verbs),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.categories:
            entry["categories"] = list(info.categories)
        entry["storageVersionHash"] = _hash(info)
        resources.append(entry)
        for sub in info.subresources:
            kind, group, version, verbs = _SUBRESOURCES.get(sub, (None, None, None, ("get",)))
            sub_entry: dict[str, Any] = {
                "name": f"{info.plural}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": kind or info.kind,
                "verbs": list(verbs),
            }
            if group is not None:
                sub_entry["group"] = group
                sub_entry["version"] = version
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str | None) -> bool:
    """Whether the client's first acceptable media type is the aggregated discovery list."""
    for item in (accept or "").split(","):
        params = dict(p.strip().split("=", 1) for p in item.split(";")[1:] if "=" in p)
        media = item.split(";")[0].strip()
        if media not in ("application/json", "*/*"):
            continue
        if params.get("as") == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io":
            return params.get("v") == "v2"
        if not params:
            return False
    return False


def _kind(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": _kind(info.group, info.version, info.kind),
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    subs = []
    for sub in info.subresources:
        kind, group, version, verbs = _SUBRESOURCES.get(sub, (None, None, None, ("get",)))
        subs.append(
            {
                "subresource": sub,
                "responseKind": _kind(
                    info.group if group is None else group,
                    info.version if version is None else version,
                    kind or info.kind,
                ),
                "verbs": list(verbs),
            }
        )
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated_discovery(
    groups: Sequence[tuple[str, Sequence[str]]], infos: Sequence[ResourceInfo]
) -> dict[str, Any]:
    """`GET /api` or `/apis` as `apidiscovery.k8s.io/v2` APIGroupDiscoveryList.

    `groups`: (group, versions in preference order); the core group is named "".
    """
    items = []
    for group, versions in groups:
        entries = []
        for version in versions:
            resources = [
                _aggregated_resource(i) for i in infos if i.group == group and i.version == version
            ]
            entries.append({"version": version, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
