"""Decoding a write's request body, and the checks kube-apiserver's decoder makes before any
rule runs: the body is a JSON object whose ObjectMeta fields have the types Go's decoder
accepts, its kind and apiVersion are the resource's, its namespace is the URL's, and an apply
configuration is YAML that decodes to an object. Each failure is a 400 Bad Request with the
real server's wording. Pure.
"""

from __future__ import annotations

from typing import Any

from localcluster.api import apierrors
from localcluster.api.jsonyaml import YAMLError, load_yaml
from localcluster.api.types import ApiError, ResourceInfo

__all__ = ["as_object", "check_body_namespace", "check_type", "decode_apply", "go_json_kind"]

# ObjectMeta fields and the JSON types the Go decoder accepts for them.
_META_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, "string"),
    "generateName": (str, "string"),
    "namespace": (str, "string"),
    "labels": (dict, "map[string]string"),
    "annotations": (dict, "map[string]string"),
    "finalizers": (list, "[]string"),
    "ownerReferences": (list, "[]v1.OwnerReference"),
}


def _undecodable(kind: str, detail: str) -> ApiError:
    return apierrors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {detail}')


def as_object(body: Any, kind: str = "object") -> dict[str, Any]:
    """The body as an object, with ObjectMeta field types checked as Go's decoder would."""
    if not isinstance(body, dict):
        raise apierrors.bad_request("the request body must be a JSON object")
    meta = body.get("metadata", {})
    if meta is None:
        return body
    if not isinstance(meta, dict):
        raise _undecodable(
            kind,
            f"json: cannot unmarshal {go_json_kind(meta)} into Go struct field {kind}.metadata of type v1.ObjectMeta",
        )
    for name, (_, go_type) in _META_TYPES.items():
        value = meta.get(name)
        if value is not None and not _meta_value_ok(name, value):
            raise _undecodable(
                kind,
                f"json: cannot unmarshal {go_json_kind(value)} into Go struct field "
                f"ObjectMeta.metadata.{name} of type {go_type}",
            )
    return body


def _meta_value_ok(name: str, value: Any) -> bool:
    if not isinstance(value, _META_TYPES[name][0]):
        return False
    if isinstance(value, dict):  # labels, annotations
        return all(isinstance(v, str) for v in value.values())
    if isinstance(value, list):
        wanted = dict if name == "ownerReferences" else str
        return all(isinstance(v, wanted) for v in value)
    return True


def go_json_kind(value: Any) -> str:
    """What Go's encoding/json calls a JSON value in "cannot unmarshal X into ..." errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def check_type(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """The body's kind and apiVersion, where given, are the resource's."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind and kind != info.kind:
        raise apierrors.bad_request(
            f'{kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            f"the kind in the body ({kind}) does not match the expected kind ({info.kind})"
        )
    if api_version and api_version != info.api_version:
        raise apierrors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({info.api_version})"
        )


def check_body_namespace(info: ResourceInfo, obj: dict[str, Any], namespace: str) -> None:
    """A namespaced body's metadata.namespace, where given, is the one on the URL."""
    body_ns = (obj.get("metadata") or {}).get("namespace")
    if info.namespaced and body_ns and body_ns != namespace:
        raise apierrors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def decode_apply(body: bytes) -> dict[str, Any]:
    """A server-side apply body (YAML or JSON) as an object."""
    try:
        applied = load_yaml(body.decode("utf-8"))
    except (UnicodeDecodeError, YAMLError) as e:
        raise apierrors.bad_request(f"error decoding YAML: {e}") from None
    if not isinstance(applied, dict):
        raise apierrors.bad_request("the apply configuration must be an object")
    return applied
