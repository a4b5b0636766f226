"""The one place that speaks HTTP to the API server: plain dicts in and out, bounded in time.

Plain aiohttp (`kube.transport`) with our own kubeconfig and in-cluster loading (`kube.config`,
pure, and `kube.auth`, which reads files, runs exec plugins and keeps credentials current). No
generated models: the project works on exactly the JSON the API server sent (and
`resourceVersion` travels back untouched, so a `replace` is conditional), and not importing a
client library's ~800 model classes keeps ~40 MiB out of every process (docs/PERFORMANCE.md).

Every call is bounded: a request by the client's `timeout` (overridable per call), a watch by
its server-side `timeoutSeconds` plus that timeout on the client side, so a hung server never
blocks a task forever. Every failure is a `kube.errors.APIError`: refusals by their status,
and timeouts, refused or dropped connections as `Unavailable` with status 0 (the HTTP side of
that lives in `kube.transport`; this module knows the API's verbs, paths and options).
"""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal

import orjson

from kube.auth import Auth, load
from kube.config import Config
from kube.errors import Unavailable, from_status
from kube.ratelimit import RateLimiter
from kube.resources import Resource
from kube.transport import JSON as _JSON
from kube.transport import Transport

__all__ = [
    "METADATA_LIST",
    "METADATA_WATCH",
    "PATCH_CONTENT_TYPES",
    "USER_AGENT",
    "Client",
    "PatchType",
]

PatchType = Literal["merge", "json", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

_ANY = "application/json, */*"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
"""Accept of a metadata-only LIST: `meta.k8s.io/v1` `PartialObjectMetadataList`, each item only
`metadata` (client-go's metadata client asks the same; plain JSON is the fallback)."""
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
"""Accept of a metadata-only WATCH: each event's object a `PartialObjectMetadata`."""


def _user_agent() -> str:
    from importlib import metadata

    try:
        return f"trainops/{metadata.version('trainops')}"
    except metadata.PackageNotFoundError:
        return "trainops"


USER_AGENT = _user_agent()
"""What every request says it comes from (the API server's audit log and metrics show it)."""
_Query = Mapping[str, str | int | float | bool | None]


class Client:
    """An API server connection. Make one with `connect` (or `from_config`), share it,
    `close` it at the end."""

    def __init__(
        self,
        config: Config,
        *,
        timeout: float = 30.0,
        field_manager: str = "trainops",
        max_connections: int = 100,
        qps: float | None = None,
        burst: int | None = None,
    ) -> None:
        """A client for `config` (see `from_config`). `qps`/`burst`: a client-side rate limit
        on every request of this client and its impersonating views, as client-go's (None: no
        limit; `burst` defaults to twice `qps`)."""
        limiter = None
        if qps:
            limiter = RateLimiter(qps, burst or max(1, round(qps * 2)))
        self._http = Transport(
            Auth(config),
            user_agent=USER_AGENT,
            max_connections=max_connections,
            rate_limiter=limiter,
        )
        self.timeout = timeout
        self.field_manager = field_manager
        self._identities: dict[tuple[str, tuple[str, ...]], Client] = {}

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 30.0,
        context: str | None = None,
        field_manager: str = "trainops",
        max_connections: int = 100,
        qps: float | None = None,
        burst: int | None = None,
    ) -> Client:
        """In-cluster credentials when `kubeconfig` is None and KUBERNETES_SERVICE_HOST is set
        (a pod), else the kubeconfig (`kubeconfig`, or the merged $KUBECONFIG files, or
        ~/.kube/config) at `context`. A kubeconfig that cannot be used raises
        `kube.config.ConfigError` naming the file and field; so does a token file that cannot
        be read or an exec plugin that fails (both are tried here, before any request)."""
        client = cls.from_config(
            load(kubeconfig, context=context),
            timeout=timeout,
            field_manager=field_manager,
            max_connections=max_connections,
            qps=qps,
            burst=burst,
        )
        await client._http.auth.prepare()
        return client

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        timeout: float = 30.0,
        field_manager: str = "trainops",
        max_connections: int = 100,
        qps: float | None = None,
        burst: int | None = None,
    ) -> Client:
        """A client for a `kube.config.Config` (server, TLS, credentials), e.g.
        `Config(server="http://127.0.0.1:8001")`. Each informer holds one connection for its
        watch, so the pool is sized generously. Credentials that need reading or running are
        obtained at the first request (`connect` obtains them at once)."""
        return cls(
            config,
            timeout=timeout,
            field_manager=field_manager,
            max_connections=max_connections,
            qps=qps,
            burst=burst,
        )

    async def close(self) -> None:
        await self._http.close()

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> Client:
        """A client acting as `user` in `groups` (Impersonate-User / Impersonate-Group: the
        API server authorizes each request as that identity, after checking that ours may
        `impersonate` it). One per identity, cached; it shares this client's connections and
        credentials, and closing it closes nothing (close this one)."""
        key = (user, tuple(groups))
        found = self._identities.get(key)
        if found is None:
            found = Client.__new__(Client)
            found._http = self._http.view(key)
            found.timeout = self.timeout
            found.field_manager = self.field_manager
            found._identities = {}
            self._identities[key] = found
        return found

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def host(self) -> str:
        return self._http.host

    @property
    def config(self) -> Config:
        """What this client was made from (server, TLS, credentials, the context's namespace)."""
        return self._http.auth.config

    @property
    def ca_file(self) -> str | None:
        """The file of the CA the server's certificate is checked against (the kubeconfig's
        `certificate-authority`), None when the kubeconfig carries it as data (`ca_pem`), or
        the system's CAs are used, or none."""
        return self._http.auth.config.ca_file

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the CA the server's certificate is checked against (the kubeconfig's
        `certificate-authority(-data)`), None when the system's CAs are used or none."""
        return self._http.auth.ca_pem

    @property
    def bearer_token(self) -> str | None:
        """The bearer token this client authenticates with now (a kubeconfig's `token` or
        `tokenFile`, a ServiceAccount's, an exec plugin's), None when it uses a client
        certificate or anything else."""
        return self._http.auth.bearer_token

    # -- reads -------------------------------------------------------------------------------

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One object (NotFound when it does not exist)."""
        path = resource.object_path(name, namespace, subresource)
        return await self._json("GET", path, timeout=timeout)

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """The List body (`items`, `metadata.resourceVersion`, `metadata.continue`); no
        namespace on a namespaced type lists all namespaces. `metadata_only`: each item is
        only its `metadata` (`METADATA_LIST`)."""
        query: dict[str, Any] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": resource_version,
        }
        return await self._json(
            "GET",
            resource.collection_path(namespace),
            query=query,
            timeout=timeout,
            accept=METADATA_LIST if metadata_only else _JSON,
        )

    # -- writes ------------------------------------------------------------------------------

    async def create(
        self,
        resource: Resource,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST `body`; the namespace comes from `body.metadata.namespace` unless given. With a
        `subresource` (`binding`, `eviction`) it is POSTed to the object named in the body."""
        ns = namespace or _meta(body).get("namespace")
        if subresource:
            path = resource.object_path(_meta(body).get("name", ""), ns, subresource)
        else:
            path = resource.collection_path(ns)
        query = {"fieldManager": field_manager or self.field_manager}
        return await self._json("POST", path, query=query, body=body, timeout=timeout)

    async def replace(
        self,
        resource: Resource,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """PUT `body` to the object it names; conditional when it carries a resourceVersion
        (a stale one raises Conflict)."""
        meta = _meta(body)
        path = resource.object_path(
            meta.get("name", ""), namespace or meta.get("namespace"), subresource
        )
        query = {"fieldManager": field_manager or self.field_manager}
        return await self._json("PUT", path, query=query, body=body, timeout=timeout)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: dict[str, Any] | builtins.list[Any],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """PATCH with the Content-Type of `patch_type`. `apply` is server-side apply: the
        body is the applied configuration and `force` takes over conflicting fields. Every
        write names `field_manager`, by default the client's."""
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}") from None
        query: dict[str, Any] = {"fieldManager": field_manager or self.field_manager}
        if patch_type == "apply":
            query["force"] = force
        elif force is not None:
            raise ValueError("force is only meaningful for server-side apply")
        path = resource.object_path(name, namespace, subresource)
        return await self._json(
            "PATCH", path, query=query, body=patch, content_type=content_type, timeout=timeout
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """DELETE, with a DeleteOptions body for the options given. `preconditions`
        (`uid`, `resourceVersion`) make it conditional: a newer object of the same name
        survives and the call raises Conflict. Returns what the server answers (the object
        while it is being finalized, else a Status)."""
        options: dict[str, Any] = {}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **options} if options else None
        path = resource.object_path(name, namespace)
        return await self._json("DELETE", path, body=body, timeout=timeout)

    # -- watch and streams -------------------------------------------------------------------

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int = 300,
        read_timeout: float | None = None,
        metadata_only: bool = False,
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Events `(type, object)` of one watch request, ADDED/MODIFIED/DELETED/BOOKMARK, until
        the server ends it (after `timeout_seconds`). An ERROR event raises its APIError (Gone
        for an expired resourceVersion). The client gives up `timeout` seconds after the
        server should have ended it, or after `read_timeout` seconds without a byte.
        `metadata_only`: each object is only its `metadata` (`METADATA_WATCH`)."""
        query: dict[str, Any] = {
            "watch": True,
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "allowWatchBookmarks": allow_bookmarks or None,
            "timeoutSeconds": int(timeout_seconds),
        }
        path = resource.collection_path(namespace)
        deadline = asyncio.get_running_loop().time() + timeout_seconds + self.timeout
        lines = self._http.lines(
            path,
            query,
            accept=METADATA_WATCH if metadata_only else _JSON,
            open_timeout=self.timeout,
            deadline=deadline,
            idle_timeout=read_timeout,
        )
        async for line in lines:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise Unavailable(0, "BadWatchEvent", f"watch {path}: {line[:200]!r}") from e
            kind = str(event.get("type") or "")
            obj = event.get("object") or {}
            if kind == "ERROR":
                raise from_status(obj)
            yield kind, obj

    async def stream_lines(
        self,
        path: str,
        *,
        query: _Query | None = None,
        idle_timeout: float | None = None,
        deadline_seconds: float | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """The lines (without the newline) of a streamed GET, e.g. `pods/<name>/log` with
        `follow=true`. Opening is bounded by the client's timeout; reading by `idle_timeout`
        (seconds without a byte) and `deadline_seconds` (the whole stream), both unbounded
        when None, as following a quiet log must be."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_seconds if deadline_seconds is not None else None
        async for line in self._http.lines(
            path,
            dict(query or {}),
            accept=_ANY,
            open_timeout=self.timeout,
            deadline=deadline,
            idle_timeout=idle_timeout,
        ):
            yield line

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        raw: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The escape hatch: any method and path (query values: bools as true/false). Returns
        the parsed JSON answer, or its bytes with `raw=True` (e.g. a pod's log). `headers` are
        sent as well (e.g. to a service behind the API server's proxy, which passes them on);
        they cannot replace the credentials, Accept or Content-Type."""
        data = await self._http.call(
            method.upper(),
            path,
            query=dict(query or {}),
            body=body,
            content_type=content_type or _JSON,
            accept=_ANY if raw else _JSON,
            timeout=self.timeout if timeout is None else timeout,
            headers=headers,
        )
        if raw:
            return data
        return orjson.loads(data) if data else {}

    # -- transport ---------------------------------------------------------------------------

    async def _json(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        timeout: float | None = None,
        accept: str = _JSON,
    ) -> dict[str, Any]:
        data = await self._http.call(
            method,
            path,
            query=query or {},
            body=body,
            content_type=content_type,
            accept=accept,
            timeout=self.timeout if timeout is None else timeout,
        )
        try:
            parsed = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError as e:
            raise Unavailable(0, "BadResponse", f"{method} {path}: not JSON: {data[:200]!r}") from e
        return parsed if isinstance(parsed, dict) else {"items": parsed}


def _meta(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, dict) else {}
