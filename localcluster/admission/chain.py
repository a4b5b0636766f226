"""The admission chain: calling mutating and validating webhooks as the API server does.

Order (the pipeline calls `mutate` before schema validation and `validate` after it):

1. `mutate`: matching mutating webhooks one after another, configurations sorted by name and
   webhooks in declaration order; each sees the object as the previous one left it. A
   `JSONPatch` response is applied at once. Webhooks with `reinvocationPolicy: IfNeeded` are
   called once more if a later webhook changed the object.
2. `validate`: matching validating webhooks, concurrently; the first denial in configuration
   order wins.

Matching (`admission_match`): rules, namespaceSelector, objectSelector, matchConditions (CEL with
`object`, `oldObject` and `request`).

Calls: `clientConfig.url` as given, or `clientConfig.service` as
`https://<name>.<namespace>.svc:<port><path>`, dialled at the Service's Endpoints (address and
port; localcluster runs everything on loopback, so an address-less Endpoints means 127.0.0.1)
with TLS verified against `caBundle` for server name `<name>.<namespace>.svc`. `?timeout=<n>s`
is appended as the API server does, and the call gives up after `timeoutSeconds` (default 10).

Outcomes, with the API server's texts:

* denial: `admission webhook "<name>" denied the request: <status.message>` with the response's
  code (at least 400; 400 when missing) and reason;
* failed call (unreachable, TLS, timeout, non-200, malformed review, a patch from a validating
  webhook, a patch that does not apply) with `failurePolicy: Fail` (the default): 500
  InternalError `Internal error occurred: failed calling webhook "<name>": failed to call
  webhook: Post "<url>?timeout=10s": <cause>`; with `Ignore`: skipped;
* warnings from responses are returned for `Warning` headers;
* dry-run requests fail with 400 for webhooks whose `sideEffects` is not None/NoneOnDryRun.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import json
import ssl
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import aiohttp
import jsonpatch

from localcluster.admission.match import (
    Webhook,
    exempt,
    matches_namespace,
    matches_object,
    matches_rules,
    ordered_webhooks,
)
from localcluster.api.types import AdmissionAttributes, ApiError
from localcluster.schema.celrules import compile_program

__all__ = ["AdmissionChain", "AdmissionLookup", "WebhookFailure"]

# The largest webhook answer read: a JSONPatch can carry a whole object (3 MiB, the API
# server's request limit) base64-encoded, so twice the object limit plus the review envelope.
_MAX_RESPONSE = 2 * 3 * 1024 * 1024 + 64 * 1024


class AdmissionLookup(Protocol):
    """What the chain reads from the server's storage."""

    async def webhook_configurations(
        self, kind: Literal["mutating", "validating"]
    ) -> list[dict[str, Any]]: ...

    async def get_namespace(self, name: str) -> dict[str, Any] | None: ...

    async def get_endpoints(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class WebhookFailure(Exception):
    """A call that did not produce a usable answer (subject to failurePolicy)."""


@dataclass(frozen=True)
class _Target:
    url: str  # what messages show: https://svc.ns.svc:443/path?timeout=10s
    dial_host: str
    dial_port: int
    server_name: str
    path_qs: str
    ca_bundle: bytes | None


@dataclass(frozen=True)
class _Answer:
    allowed: bool
    status: dict[str, Any]
    patch: list[dict[str, Any]] | None
    warnings: list[str]


class AdmissionChain:
    """Runs the webhooks of the stored configurations for each write (see module docstring)."""

    def __init__(self, lookup: AdmissionLookup) -> None:
        self._lookup = lookup
        # One HTTP session (connection pool + TLS context) per CA bundle, reused across calls
        # as the API server reuses its webhook clients; connections are further keyed by
        # (host, port, server name) inside the pool.
        self._sessions: dict[bytes | None, aiohttp.ClientSession] = {}

    async def close(self) -> None:
        """Close the webhook sessions (their pooled connections); the chain stays usable."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    def _session(self, ca_bundle: bytes | None) -> aiohttp.ClientSession:
        session = self._sessions.get(ca_bundle)
        loop = asyncio.get_running_loop()
        if session is None or session.closed or session._loop is not loop:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=_ssl_context(ca_bundle)),
            )
            self._sessions[ca_bundle] = session
        return session

    async def mutate(self, attrs: AdmissionAttributes) -> tuple[dict[str, Any] | None, list[str]]:
        """The object after the mutating webhooks (as passed in when none changed it) and their
        warnings; raises ApiError on denial or on a failed call with failurePolicy Fail."""
        if exempt(attrs):
            return attrs.obj, []
        hooks = await self._matching("mutating", attrs)
        if not hooks:  # the common case: no copy of the object needed
            return attrs.obj, []
        obj = copy.deepcopy(attrs.obj) if attrs.obj is not None else None
        warnings: list[str] = []
        changed_after: dict[int, bool] = {}
        for index, hook in enumerate(hooks):
            obj, changed = await self._mutate_once(hook, attrs, obj, warnings)
            if changed:
                for earlier in range(index):
                    changed_after[earlier] = True
        for index, hook in enumerate(hooks):
            if hook.reinvoke_if_needed and changed_after.get(index):
                obj, _ = await self._mutate_once(hook, attrs, obj, warnings)
        return obj, warnings

    async def _mutate_once(
        self,
        hook: Webhook,
        attrs: AdmissionAttributes,
        obj: dict[str, Any] | None,
        warnings: list[str],
    ) -> tuple[dict[str, Any] | None, bool]:
        current = dataclasses.replace(attrs, obj=obj)
        try:
            answer = await self._call(hook, current, mutating=True)
            if not answer.allowed:
                raise _denied(hook.name, answer.status)
            warnings.extend(answer.warnings)
            if answer.patch and obj is not None:
                try:
                    patched = jsonpatch.JsonPatch(answer.patch).apply(obj)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                    raise WebhookFailure(f"failed to apply patch: {e}") from e
                return patched, patched != obj
        except WebhookFailure as e:
            _fail_or_ignore(hook, e)
        return obj, False

    async def validate(self, attrs: AdmissionAttributes) -> list[str]:
        """Warnings of the validating webhooks (called concurrently); raises ApiError for the
        first denial or failed call (failurePolicy Fail) in configuration order."""
        if exempt(attrs):
            return []
        hooks = await self._matching("validating", attrs)
        if not hooks:
            return []
        results = await asyncio.gather(
            *(self._call(h, attrs, mutating=False) for h in hooks), return_exceptions=True
        )
        warnings: list[str] = []
        for hook, result in zip(hooks, results, strict=True):
            if isinstance(result, WebhookFailure):
                _fail_or_ignore(hook, result)
                continue
            if isinstance(result, BaseException):
                raise result
            if not result.allowed:
                raise _denied(hook.name, result.status)
            warnings.extend(result.warnings)
        return warnings

    # -- matching ----------------------------------------------------------------------------

    async def _matching(
        self, kind: Literal["mutating", "validating"], attrs: AdmissionAttributes
    ) -> list[Webhook]:
        configurations = await self._lookup.webhook_configurations(kind)
        if not configurations:
            return []
        namespace: dict[str, Any] | None = None
        if attrs.info.namespaced and attrs.namespace:
            namespace = await self._lookup.get_namespace(attrs.namespace)
        out = []
        for hook in ordered_webhooks(configurations):
            if not matches_rules(hook.spec, attrs):
                continue
            if not matches_namespace(hook.spec, attrs, namespace):
                continue
            if not matches_object(hook.spec, attrs):
                continue
            try:
                if not _match_conditions(hook.spec, attrs):
                    continue
            except WebhookFailure as e:
                _fail_or_ignore(hook, e)
                continue
            if attrs.dry_run and not hook.side_effects_safe_for_dry_run:
                raise ApiError(
                    400,
                    "BadRequest",
                    f'admission webhook "{hook.name}" does not support dry run',
                )
            out.append(hook)
        return out

    # -- calling -----------------------------------------------------------------------------

    async def _target(self, hook: Webhook) -> _Target:
        config = hook.spec.get("clientConfig") or {}
        timeout = f"timeout={hook.timeout_seconds}s"
        ca = config.get("caBundle")
        ca_bytes = base64.b64decode(ca) if ca else None
        if config.get("url"):
            url = str(config["url"])
            parts = urlsplit(url)
            sep = "&" if parts.query else "?"
            full = f"{url}{sep}{timeout}"
            host = parts.hostname or ""
            port = parts.port or 443
            path_qs = (parts.path or "/") + (f"?{parts.query}&" if parts.query else "?") + timeout
            return _Target(full, host, port, host, path_qs, ca_bytes)
        service = config.get("service") or {}
        name, namespace = str(service.get("name", "")), str(service.get("namespace", ""))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        server_name = f"{name}.{namespace}.svc"
        full = f"https://{server_name}:{port}{path}?{timeout}"
        endpoints = await self._lookup.get_endpoints(namespace, name)
        dial = _endpoint_address(endpoints, port)
        if dial is None:
            raise WebhookFailure(
                f'failed to call webhook: Post "{full}": '
                f'no endpoints available for service "{name}"',
            )
        return _Target(full, dial[0], dial[1], server_name, f"{path}?{timeout}", ca_bytes)

    async def _call(self, hook: Webhook, attrs: AdmissionAttributes, *, mutating: bool) -> _Answer:
        target = await self._target(hook)
        review = _review(attrs)
        uid = review["request"]["uid"]
        url = f"https://{_host_port(target.dial_host, target.dial_port)}{target.path_qs}"
        body = json.dumps(review).encode()
        try:
            async with (
                self._session(target.ca_bundle).post(
                    url,
                    data=body,
                    headers={
                        "Content-Type": "application/json",
                        "Accept": "application/json, */*",
                        "Host": _host_port(target.server_name, urlsplit(target.url).port or 443),
                    },
                    server_hostname=target.server_name,
                    timeout=aiohttp.ClientTimeout(total=hook.timeout_seconds),
                ) as response,
            ):
                status = response.status
                raw = await _read_body(response, target.url)
        except TimeoutError as e:
            raise WebhookFailure(
                f'failed to call webhook: Post "{target.url}": context deadline exceeded'
            ) from e
        except aiohttp.ClientConnectorCertificateError as e:
            raise WebhookFailure(
                f'failed to call webhook: Post "{target.url}": tls: failed to verify certificate: '
                f"x509: {_cert_reason(e)}"
            ) from e
        except aiohttp.ClientSSLError as e:
            raise WebhookFailure(
                f'failed to call webhook: Post "{target.url}": tls: {e.strerror or e}'
            ) from e
        except aiohttp.ClientConnectorError as e:
            raise WebhookFailure(
                f'failed to call webhook: Post "{target.url}": dial tcp '
                f"{_host_port(target.dial_host, target.dial_port)}: connect: "
                f"{_os_reason(e)}"
            ) from e
        except aiohttp.ClientError as e:
            raise WebhookFailure(f'failed to call webhook: Post "{target.url}": {e}') from e
        if status != 200:
            raise WebhookFailure(
                f"failed to call webhook: the server responded with the status code {status} "
                "but did not return more information"
            )
        return _parse_answer(raw, uid, mutating=mutating)


# --------------------------------------------------------------------------- helpers


async def _read_body(response: aiohttp.ClientResponse, url: str) -> bytes:
    """The whole response body (`content.read(n)` would return only what is buffered), refusing
    answers over _MAX_RESPONSE like a size-limited reader."""
    too_large = WebhookFailure(
        f'failed to call webhook: Post "{url}": response body too large: '
        f"the webhook response exceeds the limit of {_MAX_RESPONSE} bytes"
    )
    if response.content_length is not None and response.content_length > _MAX_RESPONSE:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > _MAX_RESPONSE:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _endpoint_address(
    endpoints: dict[str, Any] | None, service_port: int
) -> tuple[str, int] | None:
    """(address, port) to dial for a Service's Endpoints: a port equal to the service port,
    else the only port, else the first; the first ready address (127.0.0.1 when none is set)."""
    for subset in (endpoints or {}).get("subsets") or []:
        addresses = subset.get("addresses") or []
        ports = [p for p in subset.get("ports") or [] if isinstance(p.get("port"), int)]
        if not addresses or not ports:
            continue
        chosen = next((p for p in ports if p["port"] == service_port), ports[0])
        return str(addresses[0].get("ip") or "127.0.0.1"), int(chosen["port"])
    return None


def _ssl_context(ca_bundle: bytes | None) -> ssl.SSLContext:
    if ca_bundle:
        context = ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace"))
    else:
        context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _cert_reason(error: aiohttp.ClientConnectorCertificateError) -> str:
    text = str(getattr(error, "certificate_error", error))
    if "Hostname mismatch" in text or "IP address mismatch" in text:
        return "certificate is not valid for the requested name"
    if "unable to get local issuer" in text or "self-signed" in text or "self signed" in text:
        return "certificate signed by unknown authority"
    if "expired" in text:
        return "certificate has expired or is not yet valid"
    return text


def _os_reason(error: aiohttp.ClientConnectorError) -> str:
    os_error = getattr(error, "os_error", None)
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    return str(getattr(os_error, "strerror", None) or os_error or error).lower()


def _review(attrs: AdmissionAttributes) -> dict[str, Any]:
    info = attrs.info
    kind = {"group": info.group, "version": info.version, "kind": info.kind}
    resource = {"group": info.group, "version": info.version, "resource": info.plural}
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": attrs.user,
        "object": attrs.obj,
        "oldObject": attrs.old_obj,
        "dryRun": attrs.dry_run,
        "options": attrs.options
        or (
            {"apiVersion": "meta.k8s.io/v1", "kind": options_kind[attrs.operation]}
            if attrs.operation in options_kind
            else None
        ),
    }
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _parse_answer(raw: bytes, uid: str, *, mutating: bool) -> _Answer:
    def invalid(detail: str) -> WebhookFailure:
        return WebhookFailure(f"received invalid webhook response: {detail}")

    try:
        review = json.loads(raw)
    except ValueError as e:
        raise invalid(f"couldn't get version/kind; json parse error: {e}") from e
    if not isinstance(review, dict):
        raise invalid("the response is not an object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        raise invalid(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
            f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        )
    response = review.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    patch = None
    if response.get("patch") is not None or response.get("patchType") is not None:
        if not mutating:
            raise invalid("validating webhook may not return a patch")
        if response.get("patchType") != "JSONPatch":
            raise invalid(f'expected patchType "JSONPatch", got "{response.get("patchType", "")}"')
        try:
            patch = json.loads(base64.b64decode(response.get("patch") or ""))
        except (ValueError, TypeError) as e:
            raise invalid(f"failed to decode the patch: {e}") from e
        if not isinstance(patch, list):
            raise invalid("the patch is not a JSON patch")
    status = response.get("status") if isinstance(response.get("status"), dict) else {}
    warnings = [str(w) for w in response.get("warnings") or []]
    return _Answer(bool(response.get("allowed")), status or {}, patch, warnings)


def _denied(name: str, status: dict[str, Any]) -> ApiError:
    prefix = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{prefix}: {status['message']}"
    elif status.get("reason"):
        message = f"{prefix}: {status['reason']}"
    else:
        message = f"{prefix} without explanation"
    raw_code = status.get("code")
    code = raw_code if isinstance(raw_code, int) and raw_code >= 400 else 400
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return ApiError(code, str(status.get("reason") or ""), message, details=details)


def _fail_or_ignore(hook: Webhook, failure: WebhookFailure) -> None:
    if hook.failure_policy == "Ignore":
        return
    text = f'failed calling webhook "{hook.name}": {failure}'
    raise ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {text}",
        details={"causes": [{"message": text}]},
    )


def _match_conditions(hook: dict[str, Any], attrs: AdmissionAttributes) -> bool:
    conditions = hook.get("matchConditions") or []
    if not conditions:
        return True
    import celpy  # off the import path, as in celrules

    review = _review(attrs)["request"]
    activation = {
        "object": celpy.json_to_cel(attrs.obj),
        "oldObject": celpy.json_to_cel(attrs.old_obj),
        "request": celpy.json_to_cel(review),
    }
    for condition in conditions:
        program, problem = compile_program(str(condition.get("expression", "")))
        if program is None:
            raise WebhookFailure(f"compilation failed: {problem}")
        try:
            result = program.evaluate(activation)
        except Exception as e:  # CEL evaluation errors
            raise WebhookFailure(
                f'failed to evaluate match condition "{condition.get("name", "")}": {e}'
            ) from e
        if isinstance(result, Exception):
            raise WebhookFailure(f"failed to evaluate match condition: {result}")
        if not bool(result):
            return False
    return True
