"""Port clashes between pods that share the host's network (pure).

On a cluster every pod has its own IP, and so do pods here when the node gives them a network
(docs/KUBELET.md, networking). Pods on the host's network — all of them when the node cannot
make pod networks, else those with `hostNetwork: true` — share 127.0.0.1, so two that both
listen on `containerPort` 2222 collide and the second one fails with EADDRINUSE. The kubelet
cannot fix that, but it can say so before the process fails: `conflicts` lists, for a pod
about to start, the ports another active pod sharing the host's network already declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["conflicts", "declared_ports"]


def declared_ports(pod: Mapping[str, Any]) -> set[tuple[int, str]]:
    """(port, protocol) pairs the pod's containers declare (containerPort, or hostPort)."""
    out: set[tuple[int, str]] = set()
    spec = pod.get("spec") or {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for p in c.get("ports") or []:
            port = p.get("hostPort") or p.get("containerPort")
            if isinstance(port, int) and port > 0:
                out.add((port, str(p.get("protocol") or "TCP")))
    return out


def conflicts(pod: Mapping[str, Any], others: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """For each port of `pod` that other active pods also declare: (`port/protocol`, a message
    naming them). One message per port, however many pods share it: the kubelet turns each
    into one event, and a job's replicas all declare the same port."""
    mine = declared_ports(pod)
    uid = (pod.get("metadata") or {}).get("uid")
    sharing: dict[tuple[int, str], list[str]] = {}
    for other in others:
        meta = other.get("metadata") or {}
        if meta.get("uid") == uid:
            continue
        for shared in mine & declared_ports(other):
            sharing.setdefault(shared, []).append(f"{meta.get('namespace')}/{meta.get('name')}")
    found: list[tuple[str, str]] = []
    for (port, proto), names in sorted(sharing.items()):
        names.sort()
        shown = ", ".join(names[:_NAMED])
        more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        which = "pod" if len(names) == 1 else "pods"
        found.append(
            (
                f"{port}/{proto}",
                f"port {port}/{proto} is also declared by {which} {shown}{more}: pods share "
                "127.0.0.1 on this node, so only one of them can listen on it (see "
                "docs/KUBELET.md, networking)",
            )
        )
    return found


_NAMED = 3
