"""Subresources with their own shapes: `pods/log`, `pods/exec`, `pods/binding`,
`deployments/scale`.

`pods/log` is a proxy, as in Kubernetes: the API server finds the kubelet through the Node
object (`status.addresses` InternalIP, `status.daemonEndpoints.kubeletEndpoint.Port`) and
streams `GET /containerLogs/<ns>/<pod>/<container>` back, so `kubectl logs -f` follows output
while the process runs. `pods/exec` goes to the kubelet's `/exec/<ns>/<pod>/<container>` the
same way, as a relayed WebSocket (`streaming.py`); SPDY upgrades (`pods/portforward`, which
kubectl tunnels through a WebSocket, and exec from kubectl < 1.30) are passed to the kubelet's
SPDY endpoints byte for byte.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from localcluster.api import apierrors
from localcluster.api.registry import resource_id
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.http import httputil, streaming
from localcluster.http.httputil import decode_body, json_response
from localcluster.http.routing import Target
from localcluster.store import storage
from localcluster.store.records import clone
from localcluster.write import patching, writes
from localcluster.write.state import Server

__all__ = [
    "HANDLED",
    "KUBELET_TLS",
    "LOG_PARAMS",
    "handle",
    "kubelet_client_tls",
    "log_container",
    "scale_of",
]

LOG_PARAMS = (
    "follow",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "previous",
    "limitBytes",
)
CLIENT_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey(
    "client_session", aiohttp.ClientSession
)
KUBELET_TLS: web.AppKey[ssl.SSLContext] = web.AppKey("kubelet_tls", ssl.SSLContext)


# Streaming subresources a process kubelet cannot offer: a 400 that says why and what to do,
# rather than a 404 that reads like a missing pod.
UNSUPPORTED = {
    "attach": "attach is not supported: containers run as local processes on this machine; "
    "use kubectl logs -f to follow their output",
}

HANDLED = ("log", "exec", "portforward", "binding", "scale", *UNSUPPORTED)
"""The subresources `handle` serves."""


async def handle(
    request: web.Request, srv: Server, info: ResourceInfo, target: Target
) -> web.StreamResponse:
    namespace = target.namespace or ""
    name = target.name or ""
    if not name or (info.namespaced and target.namespace is None):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    sub = target.subresource
    if sub in UNSUPPORTED and request.method in ("GET", "POST"):
        if srv.get(info, namespace, name) is None:
            raise apierrors.not_found(info, name)
        raise apierrors.bad_request(UNSUPPORTED[sub])
    if sub == "exec" and request.method in ("GET", "POST"):
        return await _exec(request, srv, info, namespace, name)
    if sub == "portforward" and request.method in ("GET", "POST"):
        return await _port_forward(request, srv, info, namespace, name)
    if sub == "log" and request.method == "GET":
        return await _log(request, srv, info, namespace, name)
    if sub == "binding" and request.method == "POST":
        return await _binding(request, srv, info, namespace, name)
    if sub == "scale" and request.method in ("GET", "PUT", "PATCH"):
        return await _scale(request, srv, info, namespace, name)
    raise apierrors.method_not_allowed()


# -- pods/log ----------------------------------------------------------------------------


def log_container(pod: dict[str, Any], requested: str) -> str:
    """The container whose log is asked for; 400 with the real texts otherwise."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers = [c.get("name", "") for c in spec.get("containers") or ()]
    inits = [c.get("name", "") for c in spec.get("initContainers") or ()]
    if not requested:
        if len(containers) == 1:
            return containers[0]
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise apierrors.bad_request(message)
    if requested not in containers and requested not in inits:
        raise apierrors.bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def _waiting_reason(pod: dict[str, Any], container: str) -> str | None:
    status = pod.get("status") or {}
    for entry in (status.get("containerStatuses") or []) + (
        status.get("initContainerStatuses") or []
    ):
        if entry.get("name") == container:
            state = entry.get("state") or {}
            if "waiting" in state and not entry.get("lastState", {}).get("terminated"):
                return (state["waiting"] or {}).get("reason") or "ContainerCreating"
            return None
    return "ContainerCreating" if (status.get("phase") == "Pending") else None


def _kubelet_base(srv: Server, node_name: str) -> str:
    host, port = _kubelet_address(srv, node_name)
    return f"https://{host}:{port}"


def _kubelet_address(srv: Server, node_name: str) -> tuple[str, int]:
    node = srv.store.get("/nodes", "", node_name)
    if node is None:
        raise ApiError(
            404,
            "NotFound",
            f'nodes "{node_name}" not found',
            details={"name": node_name, "kind": "nodes"},
        )
    status = node.get("status") or {}
    address = next(
        (a.get("address") for a in status.get("addresses") or () if a.get("type") == "InternalIP"),
        "127.0.0.1",
    )
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    if not port:
        raise apierrors.internal(f'node "{node_name}" has no kubelet endpoint')
    return str(address), int(port)


def _pod_on_node(
    srv: Server, info: ResourceInfo, namespace: str, name: str
) -> tuple[dict[str, Any], str]:
    """The pod (404 when missing) and the node it is bound to ("" when not yet scheduled)."""
    pod = srv.get(info, namespace, name)
    if pod is None:
        raise apierrors.not_found(info, name)
    return pod, str((pod.get("spec") or {}).get("nodeName") or "")


async def _log(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str, name: str
) -> web.StreamResponse:
    pod, node_name = _pod_on_node(srv, info, namespace, name)
    container = log_container(pod, request.query.get("container", ""))
    if not node_name:
        return web.Response(body=b"", content_type="text/plain")
    reason = _waiting_reason(pod, container)
    if reason is not None:
        raise apierrors.bad_request(
            f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        )
    url = f"{_kubelet_base(srv, node_name)}/containerLogs/{namespace}/{name}/{container}"
    params = {k: v for k, v in request.query.items() if k in LOG_PARAMS}
    session = request.app[CLIENT_SESSION]
    try:
        # Kubelets serve TLS with a self-signed certificate; like kube-apiserver without
        # --kubelet-certificate-authority, do not verify it, but present the client
        # certificate kubelets require (`kubelet_client_tls`).
        upstream = await session.get(
            url,
            params=params,
            ssl=request.app.get(KUBELET_TLS, False),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )
    except aiohttp.ClientError as e:
        raise apierrors.internal(f'Get "{url}": {e}') from None
    async with upstream:
        if upstream.status >= 400:
            raise streaming.upstream_error(upstream.status, await upstream.read())
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass  # `kubectl logs -f` interrupted: stop following
        except aiohttp.ClientPayloadError:
            pass  # the kubelet ended the stream early (pod stopped): end ours too
        finally:
            # A reader that left mid-stream: drop the kubelet's connection at once (a TLS
            # close would wait for the kubelet's close_notify, which a quiet follow never sends).
            if not upstream.content.at_eof() and upstream.connection is not None:
                transport = upstream.connection.transport
                if transport is not None:
                    transport.abort()
        return response


# -- pods/exec ---------------------------------------------------------------------------


async def _exec(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str, name: str
) -> web.StreamResponse:
    pod, node_name = _pod_on_node(srv, info, namespace, name)
    container = log_container(pod, request.query.get("container", ""))
    if not node_name:
        raise apierrors.bad_request(f"pod {name} does not have a host assigned")
    path = f"/exec/{namespace}/{name}/{container}"
    # What kube-apiserver sends a kubelet: each `command`, and the kubelet's flag names.
    params = [("command", c) for c in request.query.getall("command", [])]
    for option, kubelet_name in (
        ("stdin", "input"),
        ("stdout", "output"),
        ("stderr", "error"),
        ("tty", "tty"),
    ):
        if request.query.get(option, "false").lower() in ("true", "1"):
            params.append((kubelet_name, "1"))
    tls = request.app.get(KUBELET_TLS, False)
    if request.headers.get("Upgrade", "").lower().startswith("spdy/"):  # kubectl < 1.30
        target = f"{path}?{urlencode(params)}"
        address = _kubelet_address(srv, node_name)
        return await streaming.proxy_spdy(request, address, target, tls=tls)
    url = f"{_kubelet_base(srv, node_name)}{path}"
    return await streaming.proxy_websocket(request, url, params, tls=tls)


# -- pods/portforward ----------------------------------------------------------------------


async def _port_forward(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str, name: str
) -> web.StreamResponse:
    _, node_name = _pod_on_node(srv, info, namespace, name)
    if not node_name:
        raise apierrors.bad_request(f"pod {name} does not have a host assigned")
    address = _kubelet_address(srv, node_name)
    return await streaming.proxy_spdy(
        request,
        address,
        f"/portForward/{namespace}/{name}",
        tls=request.app.get(KUBELET_TLS, False),
    )


def kubelet_client_tls(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The TLS context for calling kubelets: presents `cert_file`, does not verify the kubelet
    (kube-apiserver without `--kubelet-certificate-authority`)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(cert_file, key_file)
    return context


# -- pods/binding ------------------------------------------------------------------------


async def _binding(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str, name: str
) -> web.Response:
    body = await decode_body(request)
    target = (body or {}).get("target") if isinstance(body, dict) else None
    node = (target or {}).get("name") if isinstance(target, dict) else None
    if node is not None and not isinstance(node, str):
        raise apierrors.bad_request(
            'Binding in version "v1" cannot be handled as a Binding: json: cannot unmarshal '
            "number into Go struct field ObjectReference.target.name of type string"
        )
    if not node:
        raise apierrors.invalid(
            "Binding",
            "",
            name,
            [apierrors.cause("FieldValueRequired", "Required value", "target.name")],
        )
    for _ in range(5):
        pod = srv.get(info, namespace, name)
        if pod is None:
            raise apierrors.not_found(info, name)
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            raise apierrors.conflict(
                info,
                name,
                f"pod {name} is being deleted, cannot be assigned to a host",
                subresource="binding",
            )
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise apierrors.conflict(
                info,
                name,
                f'pod {name} is already assigned to node "{assigned}"',
                subresource="binding",
            )
        new = clone(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": srv.now(),
            }
        )
        status["conditions"] = conditions
        try:
            await srv.store.update(resource_id(info), new, expect_rv=meta["resourceVersion"])
        except storage.Conflict:
            continue
        return json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            status=201,
        )
    raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource="binding")


# -- deployments/scale -------------------------------------------------------------------


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec.get("replicas", 0)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(match.items())),
        },
    }


async def _scale(
    request: web.Request, srv: Server, info: ResourceInfo, namespace: str, name: str
) -> web.Response:
    for _ in range(5):
        obj = srv.get(info, namespace, name)
        if obj is None:
            raise apierrors.not_found(info, name)
        scale = scale_of(obj)
        if request.method == "GET":
            return json_response(scale)
        if request.method == "PUT":
            new_scale = await decode_body(request)
        else:
            new_scale = patching.apply_patch(
                info, clone(scale), await request.read(), request.content_type
            )
        if not isinstance(new_scale, dict):
            raise apierrors.bad_request("the request body must be a JSON object")
        want = (new_scale.get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"]["resourceVersion"]:
            raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource="scale")
        spec = new_scale.get("spec")
        replicas = spec.get("replicas") if isinstance(spec, dict) else None
        if not isinstance(replicas, int) or replicas < 0:
            raise apierrors.invalid(
                "Scale",
                "autoscaling",
                name,
                [
                    apierrors.cause(
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "spec.replicas",
                    )
                ],
            )
        new = clone(obj)
        new["spec"]["replicas"] = replicas
        try:
            result = await writes.write_update(
                srv, info, obj, new, httputil.write_options(request), subresource="scale"
            )
        except storage.Conflict:
            continue
        return json_response(scale_of(result.obj), warnings=result.warnings)
    raise apierrors.conflict(info, name, apierrors.MODIFIED, subresource="scale")
