"""URL parsing for the resource API (pure): `/api/v1/...` and `/apis/<group>/<version>/...`.

One parser instead of a route table, because the same resource is reachable in several shapes
(namespaced, all namespaces, legacy `/watch/` prefix, subresources) and the namespace resource
itself shares its prefix with the namespaced resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Target", "parse_path"]

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class Target:
    group: str
    version: str
    plural: str = ""  # "" → the group-version discovery document
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    legacy_watch: bool = False


def parse_path(path: str) -> Target | None:
    """The resource a path addresses, or None when the path is not a resource path."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if any(p == "" for p in rest):
        return None
    legacy_watch = False
    if rest and rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
        if not rest:
            return None
    if not rest:
        return Target(group, version)
    if rest[0] == "namespaces" and group == "":
        if len(rest) == 1:
            return Target(group, version, "namespaces", legacy_watch=legacy_watch)
        if len(rest) == 2:
            return Target(group, version, "namespaces", name=rest[1], legacy_watch=legacy_watch)
        if len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES:
            return Target(group, version, "namespaces", name=rest[1], subresource=rest[2])
    if rest[0] == "namespaces" and len(rest) >= 3:
        ns, rest = rest[1], rest[2:]
    else:
        ns = None
    if len(rest) > 3:
        return None
    return Target(
        group,
        version,
        plural=rest[0],
        namespace=ns,
        name=rest[1] if len(rest) > 1 else None,
        subresource=rest[2] if len(rest) > 2 else "",
        legacy_watch=legacy_watch,
    )
