"""The kubelet's only door to the API server: a small facade over the client runtime `kube.Client`.

The facade names what the kubelet, its scheduler and its Deployment controller do (bind a pod,
report a status, renew the Lease, …) so they read as before; underneath, every call is one
`kube.Client` request on plain dicts — the kubelet's pure functions work on wire JSON — bounded
by the client's timeout (`REQUEST_TIMEOUT`), and every watch by its server-side `WATCH_SECONDS`
plus that timeout, so a hung API server never blocks the kubelet forever. Not-found is a value
(`None`) where the kubelet expects it; every other failure is a `kube.errors.APIError`
(re-exported here), `Unavailable` for a timeout or a dropped connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kube import resources
from kube.client import Client
from kube.errors import APIError, Conflict, NotFound
from kube.resources import Resource

__all__ = ["REQUEST_TIMEOUT", "WATCH_SECONDS", "APIError", "Kube", "connect"]

# Server-side watch timeout: the server closes a watch after this and the kubelet re-lists.
WATCH_SECONDS = 240
# Every other request: the whole answer within this many seconds, else `Unavailable`.
REQUEST_TIMEOUT = 30.0
FIELD_MANAGER = "trainops-kubelet"


async def connect(kubeconfig: Path, *, timeout: float = REQUEST_TIMEOUT) -> Kube:
    return Kube(await Client.connect(kubeconfig, timeout=timeout, field_manager=FIELD_MANAGER))


def _set_status(status: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch that sets or replaces the whole `status`."""
    return [{"op": "add", "path": "/status", "value": status}]


class Kube:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def close(self) -> None:
        await self.client.close()

    @property
    def host(self) -> str:
        return self.client.host

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the kubeconfig's cluster CA (`certificate-authority(-data)`)."""
        return self.client.ca_pem

    # -- lists and watches -------------------------------------------------------------------
    async def list_all(
        self, resource: Resource, field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """All objects of `resource` (every namespace) and the list's resourceVersion."""
        body = await self.client.list(resource, field_selector=field_selector or None)
        items = list(body.get("items") or [])
        return items, str((body.get("metadata") or {}).get("resourceVersion", ""))

    async def watch(
        self, resource: Resource, resource_version: str, *, field_selector: str = ""
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events of one watch request (every namespace); ends when the server closes it.
        ERROR events raise their APIError (Gone for an expired resourceVersion)."""
        async for event in self.client.watch(
            resource,
            resource_version=resource_version,
            field_selector=field_selector or None,
            timeout_seconds=WATCH_SECONDS,
        ):
            yield event

    # -- pods -------------------------------------------------------------------------
    async def list_pods(self, field_selector: str = "") -> tuple[list[dict[str, Any]], str]:
        return await self.list_all(resources.PODS, field_selector)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(resources.PODS, name, namespace)

    async def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Replace the whole status (a JSON patch `add /status`: sets or replaces it)."""
        await self.client.patch(
            resources.PODS,
            name,
            _set_status(status),
            namespace,
            patch_type="json",
            subresource="status",
        )

    async def delete_pod_now(self, namespace: str, name: str, uid: str) -> None:
        """Delete with grace 0, only the pod of `uid` (not a newer one of the same name)."""
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(
                resources.PODS, name, namespace, grace_period_seconds=0, preconditions={"uid": uid}
            )

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self.client.create(resources.PODS, body, namespace, subresource="binding")

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        return await self.client.create(resources.PODS, pod, namespace)

    async def delete_pod(self, namespace: str, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.delete(resources.PODS, name, namespace)

    # -- config ------------------------------------------------------------------------
    async def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(resources.CONFIGMAPS, name, namespace)

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(resources.SECRETS, name, namespace)

    async def request_token(
        self,
        namespace: str,
        service_account: str,
        *,
        audience: str | None,
        expiration_seconds: int,
        pod: tuple[str, str],
    ) -> str | None:
        """A TokenRequest for the service account, bound to the pod (name, uid); None when
        the API server refuses it (the pod then waits, as for a missing Secret)."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience] if audience else [],
                "expirationSeconds": expiration_seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod[0],
                    "uid": pod[1],
                },
            },
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        try:
            answer = await self.client.request("POST", path, body=body)
        except APIError:
            return None
        token = (answer.get("status") or {}).get("token")
        return str(token) if token else None

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        await self.client.create(resources.EVENTS, event, namespace)

    async def bump_event(self, namespace: str, name: str, count: int, last: str) -> None:
        await self.client.patch(
            resources.EVENTS,
            name,
            {"count": count, "lastTimestamp": last},
            namespace,
            patch_type="strategic",
        )

    # -- node and lease ------------------------------------------------------------------
    async def ensure_node(self, node: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.client.create(resources.NODES, node)
        except Conflict:  # AlreadyExists
            return await self.client.get(resources.NODES, node["metadata"]["name"])

    async def label_node(self, name: str, labels: dict[str, str]) -> None:
        """Merge `labels` into the Node's (a strategic merge patch)."""
        await self.client.patch(
            resources.NODES, name, {"metadata": {"labels": labels}}, patch_type="strategic"
        )

    async def set_pod_cidr(self, name: str, cidr: str) -> None:
        """Set the Node's `spec.podCIDR(s)` (a real API server lets an unset one be set once)."""
        await self.client.patch(
            resources.NODES,
            name,
            {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}},
            patch_type="strategic",
        )

    async def patch_node_status(self, name: str, status: dict[str, Any]) -> None:
        await self.client.patch(
            resources.NODES, name, _set_status(status), patch_type="json", subresource="status"
        )

    async def ensure_namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        with contextlib.suppress(Conflict):  # AlreadyExists
            await self.client.create(resources.NAMESPACES, body)

    async def renew_lease(self, lease: dict[str, Any]) -> None:
        ns, name = lease["metadata"]["namespace"], lease["metadata"]["name"]
        try:
            await self.client.patch(
                resources.LEASES,
                name,
                [{"op": "add", "path": "/spec", "value": lease["spec"]}],
                ns,
                patch_type="json",
            )
        except NotFound:
            await self.client.create(resources.LEASES, lease, ns)

    # -- deployments -----------------------------------------------------------------------
    async def list_deployments(self) -> tuple[list[dict[str, Any]], str]:
        return await self.list_all(resources.DEPLOYMENTS)

    async def patch_deployment_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await self.client.patch(
            resources.DEPLOYMENTS,
            name,
            _set_status(status),
            namespace,
            patch_type="json",
            subresource="status",
        )

    # -- replica sets (owned by deployments) -----------------------------------------------
    async def list_replica_sets(self) -> list[dict[str, Any]]:
        items, _ = await self.list_all(resources.REPLICASETS)
        return items

    async def create_replica_set(self, namespace: str, rs: dict[str, Any]) -> dict[str, Any]:
        return await self.client.create(resources.REPLICASETS, rs, namespace)

    async def scale_replica_set(self, namespace: str, name: str, replicas: int) -> None:
        await self.client.patch(
            resources.REPLICASETS,
            name,
            [{"op": "replace", "path": "/spec/replicas", "value": replicas}],
            namespace,
            patch_type="json",
        )

    async def patch_replica_set_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await self.client.patch(
            resources.REPLICASETS,
            name,
            _set_status(status),
            namespace,
            patch_type="json",
            subresource="status",
        )

    async def annotate(
        self, kind: str, namespace: str, obj: dict[str, Any], key: str, value: str
    ) -> None:
        """Set one annotation on a Deployment or ReplicaSet (a JSON patch that works whether or
        not the object has annotations yet)."""
        if (obj.get("metadata") or {}).get("annotations") is None:
            ops = [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]
        else:
            escaped = key.replace("~", "~0").replace("/", "~1")
            ops = [{"op": "add", "path": f"/metadata/annotations/{escaped}", "value": value}]
        resource = resources.DEPLOYMENTS if kind == "Deployment" else resources.REPLICASETS
        await self.client.patch(
            resource, obj["metadata"]["name"], ops, namespace, patch_type="json"
        )

    async def _get(self, resource: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(resource, name, namespace)
        except NotFound:
            return None
