"""The few semantic checks of built-in kinds that clients visibly depend on (pure).

Schema-level checks (unknown fields, types) are crdschema's; these are the rules a schema
cannot express and that a user meets first: required containers, selector/label agreement, pod
spec immutability, CRD naming. Each returns 422 causes with the real server's texts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from localcluster.admission_config import validate_webhook_configuration
from localcluster.apierrors import cause
from localcluster.registry import resource_id
from localcluster.selectors import LabelRequirement
from localcluster.types import ResourceInfo

__all__ = ["validate_builtin_semantics", "validate_builtin_update"]

_POD_UPDATE_MSG = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


_WORKLOADS = ("apps/deployments", "apps/replicasets")
_WEBHOOK_CONFIGURATIONS = (
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
)


def _required(field: str) -> dict[str, str]:
    return cause("FieldValueRequired", "Required value", field)


def _pod_spec(spec: Any, path: str) -> list[dict[str, str]]:
    if not isinstance(spec, Mapping):
        return [_required(path)]
    containers = spec.get("containers")
    if not containers:
        return [_required(f"{path}.containers")]
    causes = []
    for i, c in enumerate(containers):
        if not isinstance(c, Mapping):
            continue
        if not c.get("name"):
            causes.append(_required(f"{path}.containers[{i}].name"))
        if not c.get("image"):
            causes.append(_required(f"{path}.containers[{i}].image"))
    return causes


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or ():
        req = LabelRequirement(
            expr.get("key", ""),
            ops.get(expr.get("operator", ""), "in"),
            tuple(expr.get("values") or ()),
        )
        if not req.matches(labels):
            return False
    return True


def validate_builtin_semantics(info: ResourceInfo, obj: Mapping[str, Any]) -> list[dict[str, str]]:
    rid = resource_id(info)
    spec = obj.get("spec")
    if rid == "/pods":
        return _pod_spec(spec, "spec")
    if rid in _WORKLOADS:
        if not isinstance(spec, Mapping):
            return [_required("spec")]
        causes = []
        selector = spec.get("selector")
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            causes.append(_required("spec.selector"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if (
            isinstance(selector, Mapping)
            and causes == []
            and not _selector_matches(selector, labels)
        ):
            import json

            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {json.dumps(labels)}: `selector` does not match template `labels`",
                    "spec.template.metadata.labels",
                )
            )
        causes.extend(_pod_spec(template.get("spec"), "spec.template.spec"))
        return causes
    if rid in _WEBHOOK_CONFIGURATIONS:
        return validate_webhook_configuration(
            dict(obj), mutating=rid == "admissionregistration.k8s.io/mutatingwebhookconfigurations"
        )
    if rid == "apiextensions.k8s.io/customresourcedefinitions":
        spec = spec if isinstance(spec, Mapping) else {}
        names = spec.get("names") or {}
        name = (obj.get("metadata") or {}).get("name", "")
        expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
        if name != expected:
            return [
                cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                    "metadata.name",
                )
            ]
    return []


def validate_builtin_update(
    info: ResourceInfo, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Immutability rules on update."""
    rid = resource_id(info)
    if rid in ("/configmaps", "/secrets") and old.get("immutable"):
        causes = []
        for field in ("data", "binaryData"):
            if old.get(field) != new.get(field):
                causes.append(
                    cause(
                        "FieldValueForbidden",
                        "Forbidden: field is immutable when `immutable` is set",
                        field,
                    )
                )
        if not new.get("immutable"):
            causes.append(
                cause(
                    "FieldValueForbidden",
                    "Forbidden: field is immutable when `immutable` is set",
                    "immutable",
                )
            )
        return causes
    if rid in _WORKLOADS:
        old_selector = (old.get("spec") or {}).get("selector")
        new_selector = (new.get("spec") or {}).get("selector")
        if old_selector != new_selector:
            import json

            return [
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {json.dumps(new_selector)}: field is immutable",
                    "spec.selector",
                )
            ]
    if rid == "/services":
        old_ip = (old.get("spec") or {}).get("clusterIP")
        new_ip = (new.get("spec") or {}).get("clusterIP")
        if old_ip and new_ip != old_ip:
            return [
                cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{new_ip or ""}": field is immutable',
                    "spec.clusterIP",
                )
            ]
    if rid == "/pods":
        old_spec = dict(old.get("spec") or {})
        new_spec = dict(new.get("spec") or {})
        for spec in (old_spec, new_spec):
            spec.pop("activeDeadlineSeconds", None)
            spec.pop("tolerations", None)
            for field in ("containers", "initContainers"):
                spec[field] = [
                    {k: v for k, v in c.items() if k != "image"} for c in spec.get(field) or ()
                ]
        if old_spec != new_spec:
            return [cause("FieldValueForbidden", _POD_UPDATE_MSG, "spec")]
    return []
