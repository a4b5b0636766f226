"""Object metadata rules of the generic registry: names, uid, timestamps, generation.

Pure functions (the caller passes `now`, the uid and the random name suffix), so every rule is
table-tested. Texts of validation failures are the real server's, because kubectl prints them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from localcluster.api import apierrors
from localcluster.api.fielderrors import FieldError
from localcluster.api.registry import GENERATION_KINDS, resource_id
from localcluster.api.types import ResourceInfo

__all__ = [
    "NAME_SUFFIX_ALPHABET",
    "bump_generation",
    "carry_over_meta",
    "name_causes",
    "now_rfc3339",
    "prepare_create",
    "prepare_update",
    "spec_changed",
    "update_generation",
    "validate_meta",
]

NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_ANNOTATIONS = 262144

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# Resources whose names must be DNS labels rather than subdomains.
_LABEL_NAMED = {"/namespaces"}
_DNS1035_NAMED = {"/services"}


def now_rfc3339(now: Any) -> str:
    """`2026-01-02T03:04:05Z` (seconds precision, as metadata timestamps are)."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    return apierrors.cause(
        "FieldValueInvalid", f"Invalid value: {json.dumps(value)}: {detail}", field
    )


def name_causes(
    info: ResourceInfo, name: str, field: str = "metadata.name"
) -> list[dict[str, str]]:
    """Causes for an invalid object name (empty list when valid)."""
    rid = resource_id(info)
    if rid in _LABEL_NAMED:
        pattern, message, limit = _LABEL, _LABEL_MSG, 63
    elif rid in _DNS1035_NAMED:
        pattern, message, limit = _DNS1035, _DNS1035_MSG, 63
    else:
        pattern, message, limit = _SUBDOMAIN, _SUBDOMAIN_MSG, 253
    causes = []
    if len(name) > limit:
        causes.append(_invalid(field, name, f"must be no more than {limit} characters"))
    if not pattern.match(name):
        causes.append(_invalid(field, name, message))
    return causes


def _label_causes(labels: Mapping[str, Any]) -> list[dict[str, str]]:
    causes = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (
            not name
            or len(name) > 63
            or not _QUALIFIED.match(name)
            or (prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)))
        ):
            causes.append(
                _invalid(
                    "metadata.labels",
                    key,
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                    "'my.name',  or '123-abc', regex used for validation is "
                    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                )
            )
        if not isinstance(value, str):
            causes.append(_invalid("metadata.labels", value, "must be a string"))
        elif len(value) > 63 or (value and not _QUALIFIED.match(value)):
            causes.append(_invalid("metadata.labels", value, _VALUE_MSG))
    return causes


def validate_meta(info: ResourceInfo, obj: Mapping[str, Any]) -> list[dict[str, str]]:
    """Causes for invalid metadata: name, labels, annotation size."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes = []
    if not name:
        causes.append(
            apierrors.cause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        )
    else:
        causes.extend(name_causes(info, name))
    labels = meta.get("labels")
    if isinstance(labels, Mapping):
        causes.extend(_label_causes(labels))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        size = sum(len(k) + len(str(v)) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS:
            causes.append(FieldError.too_long("metadata.annotations", MAX_ANNOTATIONS).cause())
    return causes


def _tracks_generation(info: ResourceInfo) -> bool:
    return info.is_custom or resource_id(info) in GENERATION_KINDS


def prepare_create(
    info: ResourceInfo,
    obj: dict[str, Any],
    *,
    namespace: str,
    now: str,
    uid: str,
    suffix: str,
) -> dict[str, Any]:
    """Server-owned metadata for a new object (`obj` is a private copy and is changed)."""
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise apierrors.bad_request("metadata must be an object")
    if info.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = str(meta["generateName"])[:58] + suffix
    meta["uid"] = uid
    meta["creationTimestamp"] = now
    for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(field, None)
    if _tracks_generation(info):
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    obj["apiVersion"] = info.api_version
    obj["kind"] = info.kind
    return obj


_KEEP_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
)


def carry_over_meta(
    info: ResourceInfo, old: Mapping[str, Any], obj: dict[str, Any]
) -> dict[str, Any]:
    """Carry the server-owned metadata over from `old` (generation unchanged).

    No finalizer may be added to an object being deleted (422).
    """
    meta = obj.setdefault("metadata", {})
    old_meta = old.get("metadata") or {}
    for field in _KEEP_ON_UPDATE:
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    if "deletionTimestamp" in old_meta and set(meta.get("finalizers") or ()) - set(
        old_meta.get("finalizers") or ()
    ):
        raise apierrors.invalid(
            info.kind,
            info.group,
            meta.get("name", ""),
            [
                apierrors.cause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being deleted",
                    "metadata.finalizers",
                )
            ],
        )
    obj["apiVersion"] = info.api_version
    obj["kind"] = info.kind
    return obj


def update_generation(
    info: ResourceInfo, old: Mapping[str, Any], obj: dict[str, Any], *, subresource: str = ""
) -> dict[str, Any]:
    """metadata.generation of the object about to be stored: the old one, plus one when
    `spec_changed`. Call it on the object as it will be stored — after mutating admission and
    schema defaulting, as kube-apiserver's PrepareForUpdate runs after them — so defaults a
    request leaves out and a webhook puts back are no change. `/status` never bumps it.
    """
    meta = obj.setdefault("metadata", {})
    old_meta = old.get("metadata") or {}
    if "generation" in old_meta:
        meta["generation"] = old_meta["generation"]
    else:
        meta.pop("generation", None)
    if _tracks_generation(info) and subresource != "status" and spec_changed(info, old, obj):
        meta["generation"] = int(old_meta.get("generation") or 1) + 1
    return obj


def prepare_update(
    info: ResourceInfo, old: Mapping[str, Any], obj: dict[str, Any]
) -> dict[str, Any]:
    """Carry the immutable metadata over from `old` and bump generation on spec changes."""
    carry_over_meta(info, old, obj)
    return update_generation(info, old, obj)


# Built-in kinds whose generation follows something else than `spec` (their registry
# strategies' PrepareForUpdate): a Deployment's annotations are copied to its ReplicaSets, so
# they count; webhook configurations have no spec.
_GENERATION_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "apps/deployments": (("spec",), ("metadata", "annotations")),
    "admissionregistration.k8s.io/mutatingwebhookconfigurations": (("webhooks",),),
    "admissionregistration.k8s.io/validatingwebhookconfigurations": (("webhooks",),),
}


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def spec_changed(info: ResourceInfo, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a change counts for metadata.generation.

    Built-ins: `spec` changed (Deployments: or their annotations; webhook configurations:
    `webhooks`). Custom resources: anything but metadata changed — status included unless
    the CRD has a status subresource (then only `/status` writes it, and they never count).
    An empty map or list and a missing one are the same, as Go's typed objects see them.
    """
    if not info.is_custom:
        paths = _GENERATION_FIELDS.get(resource_id(info), (("spec",),))
        return any(_empty_as_none(_at(old, p)) != _empty_as_none(_at(new, p)) for p in paths)
    skip = {"metadata", "apiVersion", "kind"}
    if "status" in info.subresources:
        skip.add("status")
    keys = (set(old) | set(new)) - skip
    return any(old.get(k) != new.get(k) for k in keys)


def _empty_as_none(value: Any) -> Any:
    return None if value in ({}, [], None) else value


def bump_generation(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """Deletion (setting deletionTimestamp) bumps generation where it is tracked."""
    meta = obj["metadata"]
    if _tracks_generation(info) and "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1
