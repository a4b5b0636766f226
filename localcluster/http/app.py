"""The aiohttp application: authentication, error mapping, and the route table.

Every failure leaves as a `Status` object: `ApiError`s with their own code, anything unexpected
as a 500 InternalError (the traceback goes to the log, never to the client). Requests need the
bearer token, except the health and version endpoints, which a real cluster also serves to
anonymous clients.
"""

from __future__ import annotations

import hmac
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Middleware

from localcluster.api import apierrors, reviews
from localcluster.api.types import ApiError
from localcluster.http import discovery, handlers, protobuf
from localcluster.http.handlers import USERS
from localcluster.http.httputil import json_response
from localcluster.http.subresources import CLIENT_SESSION, KUBELET_TLS
from localcluster.schema import openapi
from localcluster.write.state import Server

__all__ = ["SERVER", "create_app"]

log = logging.getLogger("localcluster.apiserver")

SERVER: web.AppKey[Server] = web.AppKey("server", Server)
_PUBLIC = frozenset({"/healthz", "/livez", "/readyz", "/version"})
MAX_BODY = 3 * 1024 * 1024 + 64 * 1024
_OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _auth_middleware(tokens: Iterable[str]) -> Middleware:
    expected = [f"Bearer {token}".encode() for token in tokens]

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        if header is None and request.path in _PUBLIC:
            return await handler(request)
        given = (header or "").encode()
        # Every token compared (constant time each), so which one matched does not show.
        matched = [hmac.compare_digest(given, e) for e in expected]
        if header is None or not any(matched):
            return json_response(apierrors.unauthorized().status(), 401)
        return await handler(request)

    return authenticate


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as e:
        return json_response(e.status(), e.code)
    except web.HTTPRequestEntityTooLarge:
        err = ApiError(
            413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}"
        )
        return json_response(err.status(), 413)
    except web.HTTPException as e:
        if e.status >= 400:
            reason = (
                "NotFound" if e.status == 404 else "MethodNotAllowed" if e.status == 405 else ""
            )
            err = ApiError(
                e.status,
                reason,
                e.reason if e.status != 404 else "the server could not find the requested resource",
            )
            return json_response(err.status(), e.status)
        raise
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        raise
    except RecursionError:  # an object nested deeper than any step can walk: the client's doing
        log.info("%s %s: the object is nested too deeply", request.method, request.path)
        err = apierrors.bad_request("the object is nested too deeply to be processed")
        return json_response(err.status(), 400)
    except Exception as e:
        log.exception("%s %s failed", request.method, request.path)
        err = apierrors.internal(f"{type(e).__name__}: {e}")
        return json_response(err.status(), 500)


async def _version(request: web.Request) -> web.Response:
    return json_response(discovery.version_info())


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _aggregated(request: web.Request, core: bool) -> web.Response | None:
    if not discovery.wants_aggregated(request.headers.get("Accept")):
        return None
    registry = request.app[SERVER].registry
    groups = [("", ["v1"])] if core else registry.group_versions()
    body = discovery.aggregated_discovery(groups, registry.all())
    response = json_response(body)
    response.headers["Content-Type"] = discovery.AGGREGATED_CONTENT_TYPE
    return response


async def _api(request: web.Request) -> web.Response:
    aggregated = _aggregated(request, core=True)
    if aggregated is not None:
        return aggregated
    return json_response(discovery.api_versions(request.app[SERVER].server_address))


async def _apis(request: web.Request) -> web.Response:
    aggregated = _aggregated(request, core=False)
    if aggregated is not None:
        return aggregated
    return json_response(discovery.api_group_list(request.app[SERVER].registry.group_versions()))


async def _openapi_v2(request: web.Request) -> web.Response:
    accept = request.headers.get("Accept", "")
    if accept and "json" not in accept and "*/*" not in accept:
        if "protobuf" not in accept:
            raise apierrors.not_acceptable(accept)
        body = protobuf.empty_openapi_v2("Kubernetes", discovery.KUBERNETES_VERSION)
        return web.Response(body=body, content_type=_OPENAPI_V2_PROTOBUF)
    return json_response(openapi.openapi_v2(request.app[SERVER].registry.all()))


async def _openapi_v3(request: web.Request) -> web.Response:
    return json_response(openapi.openapi_v3_index(request.app[SERVER].registry.all()))


async def _openapi_v3_doc(request: web.Request) -> web.Response:
    path = request.match_info["path"].strip("/")
    if path.startswith("api/"):
        gv = path[len("api/") :]
    elif path.startswith("apis/"):
        gv = path[len("apis/") :]
    else:
        raise handlers.not_found_resource()
    doc = openapi.openapi_v3_document(gv, request.app[SERVER].registry.all())
    if doc is None:
        raise handlers.not_found_resource()
    return json_response(doc)


async def _resources(request: web.Request) -> web.StreamResponse:
    return await handlers.dispatch(request, request.app[SERVER])


async def _client_session(app: web.Application) -> AsyncIterator[None]:
    session = aiohttp.ClientSession()
    app[CLIENT_SESSION] = session
    yield
    await session.close()


def create_app(
    srv: Server,
    token: str,
    *,
    kubelet_tls: ssl.SSLContext | None = None,
    api_token: str | None = None,
) -> web.Application:
    """The API server's routes; `kubelet_tls` holds the client certificate presented to
    kubelets for `pods/log` (kube-apiserver's `--kubelet-client-certificate`). `token` is the
    admin's (the kubeconfig's); `api_token`, when given, is accepted too, as the user
    `reviews.API_USER` (the HTTP API's and dashboard's user; TokenReview knows both)."""
    users: dict[str, Mapping[str, Any]] = {token: reviews.ADMIN}
    if api_token:
        users[api_token] = reviews.API_USER
    app = web.Application(middlewares=[_errors, _auth_middleware(users)], client_max_size=MAX_BODY)
    app[SERVER] = srv
    app[USERS] = users
    if kubelet_tls is not None:
        app[KUBELET_TLS] = kubelet_tls
    app.cleanup_ctx.append(_client_session)
    app.router.add_get("/version", _version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, _health)
    app.router.add_get("/api", _api)
    app.router.add_get("/api/", _api)
    app.router.add_get("/apis", _apis)
    app.router.add_get("/apis/", _apis)
    app.router.add_get("/openapi/v2", _openapi_v2)
    app.router.add_get("/openapi/v3", _openapi_v3)
    app.router.add_get("/openapi/v3/{path:.+}", _openapi_v3_doc)
    app.router.add_route("*", "/api/{tail:.+}", _resources)
    app.router.add_route("*", "/apis/{tail:.+}", _resources)
    return app
