"""What a reconcile round looks at, by key (pure): the kinds and keys of the checked entries,
the source file of every resource as the last status (or comparison) recorded it, and a fingerprint of the
live objects (their resourceVersions) that tells whether anything changed since."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from typing import Any

from gitops.engine import kinds
from gitops.engine.pairing import ResourceKey, key_of
from gitops.engine.preflight import Checked
from kube.resources import name_problem

__all__ = ["desired_keys", "fingerprint", "kinds_of", "recorded_sources", "sources_of"]


def kinds_of(checked: Iterable[Checked]) -> set[tuple[str, str]]:
    out = set()
    for c in checked:
        obj = c.desired or c.entry.obj
        if obj and obj.get("apiVersion") and obj.get("kind"):
            out.add((str(obj["apiVersion"]), str(obj["kind"])))
    return out


def desired_keys(
    checked: Iterable[Checked],
    destination: str,
    cluster_scoped: Collection[tuple[str, str]] = kinds.CLUSTER_SCOPED,
) -> list[ResourceKey]:
    out = []
    for c in checked:
        obj = c.desired or c.entry.obj
        meta = obj.get("metadata") if obj else None
        if obj and obj.get("kind") and isinstance(meta, dict) and meta.get("name"):
            key = key_of(obj, destination, cluster_scoped=cluster_scoped)
            if any(name_problem(v) for v in (key.name, key.namespace) if v):
                continue  # `.`, `..`: no object has that name (an entry error says so)
            out.append(key)
    return out


def recorded_sources(obj: dict[str, Any]) -> dict[ResourceKey, str]:
    """The file of every resource in the current status (`resources[].file`)."""
    out = {}
    for r in (obj.get("status") or {}).get("resources") or []:
        if isinstance(r, dict) and r.get("file") and r.get("name"):
            key = ResourceKey(
                str(r.get("group") or ""),
                str(r.get("kind") or ""),
                str(r.get("namespace") or ""),
                str(r["name"]),
            )
            out[key] = str(r["file"])
    return out


def sources_of(resources: Iterable[Any]) -> dict[ResourceKey, str]:
    """The file of every resource of a comparison (`compare.ResourceState`s) that has one:
    the status lists only some of them on a big repository."""
    return {r.key: r.file for r in resources if r.key is not None and r.file}


def fingerprint(live: dict[ResourceKey, dict[str, Any]], tracked: set[ResourceKey]) -> str:
    digest = hashlib.sha256()
    for key in sorted(live):
        rv = (live[key].get("metadata") or {}).get("resourceVersion", "")
        digest.update(f"{key}|{rv}|{key in tracked}\n".encode())
    return digest.hexdigest()
