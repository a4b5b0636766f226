"""Which REST resource serves an apiVersion/kind, asked of the API server (discovery), cached.

The sync engine applies whatever kinds a repository holds, not only the ones `kube.resources`
names, so it asks `/api/v1` or `/apis/<group>/<version>` (an APIResourceList) once per
group-version and remembers the answer. A kind missing from a cached list is asked again, at
most every `refresh_seconds` per group-version: a CRD the same sync has just created becomes
usable on the next attempt without hammering the server for a kind that will never exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kube import errors
from kube.client import Client
from kube.resources import Resource

__all__ = ["Discovery"]


class Discovery:
    def __init__(
        self,
        client: Client,
        *,
        refresh_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._lists: dict[str, tuple[float, dict[str, Resource]]] = {}

    async def resource(self, api_version: str, kind: str) -> Resource | None:
        """The resource of `kind` in `api_version` (`v1`, `apps/v1`), or None when the server
        does not serve it."""
        cached = self._lists.get(api_version)
        if cached is not None:
            fetched, kinds = cached
            if kind in kinds or self._clock() - fetched < self.refresh_seconds:
                return kinds.get(kind)
        kinds = await self._fetch(api_version)
        self._lists[api_version] = (self._clock(), kinds)
        return kinds.get(kind)

    def known_plural(self, group: str, kind: str) -> str | None:
        """The resource name of `group`/`kind` from what was discovered already (no request);
        None when no cached answer names it."""
        for api_version, (_, kinds) in self._lists.items():
            if api_version.rpartition("/")[0] == group and kind in kinds:
                return kinds[kind].plural
        return None

    async def _fetch(self, api_version: str) -> dict[str, Resource]:
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            body = await self.client.request("GET", path)
        except errors.NotFound:
            return {}
        out: dict[str, Resource] = {}
        for item in body.get("resources") or []:
            name = str(item.get("name") or "")
            if not name or "/" in name:
                continue  # a subresource (pods/log, …)
            kind = str(item.get("kind") or "")
            out.setdefault(kind, Resource(group, version, name, kind, bool(item.get("namespaced"))))
        return out
