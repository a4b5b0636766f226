"""The certificate manager's only door to the cluster: get/create/replace of whole objects.

The one module in `certs` that imports `kubernetes_asyncio`. It speaks plain dicts (the JSON the
API server sends), not the generated model classes, so the pure functions in `certs.inject`
and `certs.rotation` work on exactly what came over the wire and `resourceVersion` travels
back untouched — a `replace` is then conditional, and a concurrent writer makes it fail with
`Conflict` instead of being overwritten.

Errors form a small family:

    ClusterError          any refusal from the API server (status code and message)
    └── Conflict          409: the object changed since it was read, or already exists
"""

from __future__ import annotations

import os
from typing import Any, Protocol

__all__ = ["Cluster", "ClusterError", "Conflict", "KubeCluster", "connect"]

_PATHS = {
    "Secret": "/api/v1/namespaces/{namespace}/secrets",
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    ),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    ),
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}


class ClusterError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Conflict(ClusterError):
    """409: a conditional write lost a race; read again and recompute."""


class Cluster(Protocol):
    """What the manager needs from a cluster. `namespace` is only used for Secrets."""

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None: ...

    async def create(
        self, kind: str, body: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]: ...

    async def replace(
        self, kind: str, name: str, body: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]: ...


class KubeCluster:
    """`Cluster` over a `kubernetes_asyncio` ApiClient."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client

    async def close(self) -> None:
        await self.api.close()

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        try:
            return await self._call("GET", _path(kind, namespace, name))
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, kind: str, body: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        return await self._call("POST", _path(kind, namespace), body)

    async def replace(
        self, kind: str, name: str, body: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        return await self._call("PUT", _path(kind, namespace, name), body)

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            result = await self.api.call_api(
                path,
                method,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                response_types_map={200: "object", 201: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except ApiException as exc:
            error = Conflict if exc.status == 409 else ClusterError
            raise error(int(exc.status or 0), _message(exc)) from None
        return result if isinstance(result, dict) else {}


async def connect(kubeconfig: str | None = None) -> KubeCluster:
    """In-cluster credentials when running in a pod, else the kubeconfig."""
    from kubernetes_asyncio import client, config

    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call, unused-ignore]
    else:
        await config.load_kube_config(config_file=kubeconfig)
    return KubeCluster(client.ApiClient())


def _path(kind: str, namespace: str, name: str | None = None) -> str:
    base = _PATHS[kind].format(namespace=namespace)
    return f"{base}/{name}" if name else base


def _message(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body)["message"])
    except Exception:
        return str(exc.reason or "request failed")
