"""The kubelet's only door to the API server: `kubernetes_asyncio` with the kubeconfig.

Every call returns plain dicts (`_preload_content=False` and `json.loads`), because the kubelet's
pure functions work on wire JSON, and the generated models would drop fields they do not know
and cannot deserialize some answers (the binding subresource's is a known case). Not-found is a
value (`None`/`False`), other API errors propagate as `ApiException`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["ApiException", "Kube", "connect", "read_json"]

# Server-side watch timeout: the server closes a watch after this and the kubelet re-lists.
WATCH_SECONDS = 240


async def connect(kubeconfig: Path) -> Kube:
    api_client = await config.new_client_from_config(config_file=str(kubeconfig))
    return Kube(api_client)


async def read_json(resp: Any) -> Any:
    """The JSON body of a raw (`_preload_content=False`) response; errors as `ApiException`.

    Raw responses are not checked by the client, so a 404 or 409 must be raised here.
    """
    data = await resp.read()
    resp.release()
    if not 200 <= resp.status <= 299:
        error = ApiException(status=resp.status, reason=resp.reason)
        error.body = data
        raise error
    return json.loads(data) if data else None


class Kube:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        # Typed as Any: the generated signatures ask for models, the kubelet sends wire dicts.
        self.core: Any = client.CoreV1Api(api_client)
        self.apps: Any = client.AppsV1Api(api_client)
        self.coordination: Any = client.CoordinationV1Api(api_client)

    async def close(self) -> None:
        await self.api_client.close()

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    # -- pods -------------------------------------------------------------------------
    async def list_pods(self, field_selector: str = "") -> tuple[list[dict[str, Any]], str]:
        kwargs: dict[str, Any] = {"_preload_content": False}
        if field_selector:
            kwargs["field_selector"] = field_selector
        body = await read_json(await self.core.list_pod_for_all_namespaces(**kwargs))
        return list(body.get("items") or []), str(
            (body.get("metadata") or {}).get("resourceVersion", "")
        )

    async def watch(
        self, list_fn: Any, resource_version: str, **kwargs: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events of one watch request; ends when the server closes it. ERROR events raise."""
        resp = await list_fn(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            **kwargs,
        )
        if not 200 <= resp.status <= 299:
            await read_json(resp)
        try:
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise ApiException(status=obj.get("code", 500), reason=obj.get("message", ""))
                yield event["type"], event["object"]
        finally:
            resp.release()

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await read_json(
                await self.core.read_namespaced_pod(name, namespace, _preload_content=False)
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Replace the whole status (a JSON patch `add /status`: sets or replaces it)."""
        await read_json(
            await self.core.patch_namespaced_pod_status(
                name,
                namespace,
                [{"op": "add", "path": "/status", "value": status}],
                _preload_content=False,
            )
        )

    async def delete_pod_now(self, namespace: str, name: str, uid: str) -> None:
        try:
            await read_json(
                await self.core.delete_namespaced_pod(
                    name,
                    namespace,
                    body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
                    _preload_content=False,
                )
            )
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    async def bind_pod(self, namespace: str, name: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await read_json(
            await self.core.create_namespaced_pod_binding(
                name, namespace, body, _preload_content=False
            )
        )

    async def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        return await read_json(
            await self.core.create_namespaced_pod(namespace, pod, _preload_content=False)
        )

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            await read_json(
                await self.core.delete_namespaced_pod(name, namespace, _preload_content=False)
            )
        except ApiException as e:
            if e.status != 404:
                raise

    # -- config ------------------------------------------------------------------------
    async def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await read_json(
                await self.core.read_namespaced_config_map(name, namespace, _preload_content=False)
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await read_json(
                await self.core.read_namespaced_secret(name, namespace, _preload_content=False)
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        await read_json(
            await self.core.create_namespaced_event(namespace, event, _preload_content=False)
        )

    async def bump_event(self, namespace: str, name: str, count: int, last: str) -> None:
        await read_json(
            await self.core.patch_namespaced_event(
                name,
                namespace,
                {"count": count, "lastTimestamp": last},
                _preload_content=False,
            )
        )

    # -- node and lease ------------------------------------------------------------------
    async def ensure_node(self, node: dict[str, Any]) -> dict[str, Any]:
        name = node["metadata"]["name"]
        try:
            return await read_json(await self.core.create_node(node, _preload_content=False))
        except ApiException as e:
            if e.status != 409:
                raise
        return await read_json(await self.core.read_node(name, _preload_content=False))

    async def label_node(self, name: str, labels: dict[str, str]) -> None:
        """Merge `labels` into the Node's (a strategic merge patch, as dict bodies are sent)."""
        await read_json(
            await self.core.patch_node(
                name, {"metadata": {"labels": labels}}, _preload_content=False
            )
        )

    async def patch_node_status(self, name: str, status: dict[str, Any]) -> None:
        await read_json(
            await self.core.patch_node_status(
                name, [{"op": "add", "path": "/status", "value": status}], _preload_content=False
            )
        )

    async def ensure_namespace(self, name: str) -> None:
        try:
            await read_json(
                await self.core.create_namespace(
                    {"metadata": {"name": name}}, _preload_content=False
                )
            )
        except ApiException as e:
            if e.status != 409:
                raise

    async def renew_lease(self, lease: dict[str, Any]) -> None:
        ns, name = lease["metadata"]["namespace"], lease["metadata"]["name"]
        try:
            await read_json(
                await self.coordination.patch_namespaced_lease(
                    name,
                    ns,
                    [{"op": "add", "path": "/spec", "value": lease["spec"]}],
                    _preload_content=False,
                )
            )
        except ApiException as e:
            if e.status != 404:
                raise
            await read_json(
                await self.coordination.create_namespaced_lease(ns, lease, _preload_content=False)
            )

    # -- deployments -----------------------------------------------------------------------
    async def list_deployments(self) -> tuple[list[dict[str, Any]], str]:
        body = await read_json(
            await self.apps.list_deployment_for_all_namespaces(_preload_content=False)
        )
        return list(body.get("items") or []), str(
            (body.get("metadata") or {}).get("resourceVersion", "")
        )

    async def patch_deployment_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await read_json(
            await self.apps.patch_namespaced_deployment_status(
                name,
                namespace,
                [{"op": "add", "path": "/status", "value": status}],
                _preload_content=False,
            )
        )

    # -- replica sets (owned by deployments) -----------------------------------------------
    async def list_replica_sets(self) -> list[dict[str, Any]]:
        body = await read_json(
            await self.apps.list_replica_set_for_all_namespaces(_preload_content=False)
        )
        return list(body.get("items") or [])

    async def create_replica_set(self, namespace: str, rs: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await read_json(
            await self.apps.create_namespaced_replica_set(namespace, rs, _preload_content=False)
        )
        return result

    async def scale_replica_set(self, namespace: str, name: str, replicas: int) -> None:
        await read_json(
            await self.apps.patch_namespaced_replica_set(
                name,
                namespace,
                [{"op": "replace", "path": "/spec/replicas", "value": replicas}],
                _preload_content=False,
            )
        )

    async def patch_replica_set_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await read_json(
            await self.apps.patch_namespaced_replica_set_status(
                name,
                namespace,
                [{"op": "add", "path": "/status", "value": status}],
                _preload_content=False,
            )
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
        patch = (
            self.apps.patch_namespaced_deployment
            if kind == "Deployment"
            else self.apps.patch_namespaced_replica_set
        )
        await read_json(
            await patch(obj["metadata"]["name"], namespace, ops, _preload_content=False)
        )
