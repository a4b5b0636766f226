"""Core v1 Events about pods, as the kubelet and the scheduler record them (pure builder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["pod_event"]


def pod_event(
    pod: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    now: str,
    suffix: str,
    component: str = "kubelet",
    host: str = "",
    warning: bool = False,
    container: str = "",
) -> dict[str, Any]:
    """An Event whose involvedObject is `pod` (and `spec.containers{c}`, or
    `spec.initContainers{c}` for an init container, when about a container).

    `suffix` makes the name unique (`<pod>.<suffix>`, like the `<pod>.<hex>` names of real events).
    """
    meta = pod["metadata"]
    namespace = meta.get("namespace", "default")
    involved: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "namespace": namespace,
        "uid": meta.get("uid", ""),
    }
    if meta.get("resourceVersion"):
        involved["resourceVersion"] = meta["resourceVersion"]
    if container:
        inits = ((pod.get("spec") or {}).get("initContainers")) or []
        field = "initContainers" if any(c.get("name") == container for c in inits) else "containers"
        involved["fieldPath"] = f"spec.{field}{{{container}}}"
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
    }
    if host:
        event["reportingInstance"] = host
    return event
