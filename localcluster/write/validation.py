"""The few semantic checks of built-in kinds that clients visibly depend on (pure).

Schema-level checks (unknown fields, types) are crdschema's; these are the rules a schema
cannot express and that a user meets first: required containers, selector/label agreement, pod
spec immutability, CRD naming. Each returns 422 causes with the real server's texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from localcluster.admission.config import validate_webhook_configuration
from localcluster.api.apierrors import cause
from localcluster.api.registry import resource_id
from localcluster.api.types import ResourceInfo
from localcluster.schema.celk8s import Quantity
from localcluster.store.selectors import LabelRequirement

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
    for field in ("containers", "initContainers"):  # ValidatePodSpec order
        items = spec.get(field)
        for i, c in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(c, Mapping):
                continue
            if not c.get("name"):
                causes.append(_required(f"{path}.{field}[{i}].name"))
            if not c.get("image"):
                causes.append(_required(f"{path}.{field}[{i}].image"))
            causes.extend(
                _resource_requirements(c.get("resources"), f"{path}.{field}[{i}].resources")
            )
    causes.extend(_restart_policy(spec.get("restartPolicy"), path))
    return causes


def _restart_policy(policy: Any, path: str) -> list[dict[str, str]]:
    """A Pod's own spec allows three policies; a workload's template only `Always`."""
    allowed = ("Always", "OnFailure", "Never") if path == "spec" else ("Always",)
    if policy is None or policy in allowed:
        return []
    supported = ", ".join(f'"{p}"' for p in allowed)
    return [
        cause(
            "FieldValueNotSupported",
            f"Unsupported value: {json.dumps(policy)}: supported values: {supported}",
            f"{path}.restartPolicy",
        )
    ]


_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T",
                   15: "P", 18: "E"}  # fmt: skip
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NANO = Decimal("1e-9")


def canonical_quantity(text: str) -> str:
    """`resource.Quantity.String()`: the value rounded up to nano units, in the format of the
    input's suffix (binary, decimal SI or exponent), with the largest suffix that keeps an
    integer mantissa (`2000m` → `2`, `1024Mi` → `1Gi`, `0.5` → `500m`, `1.5Gi` → `1536Mi`)."""
    q = Quantity(text.strip())
    value = q.value.quantize(_NANO, rounding=ROUND_CEILING) if q.value else Decimal(0)
    if value == 0:
        return "0"
    suffix = text.strip().lstrip("+-0123456789.")
    binary = suffix.endswith("i")
    if binary and (-1024 < value < 1024 or value != value.to_integral_value()):
        binary = False  # as Go: small or fractional binary quantities print as decimal SI
    if binary:
        n, power = int(value), 0
        while power < 6 and n % 1024 == 0:
            n, power = n // 1024, power + 1
        return f"{n}{_BINARY_SUFFIX[power]}"
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits))) * (-1 if sign else 1)
    extra = exponent % 3
    mantissa, exponent = mantissa * 10**extra, exponent - extra
    if len(suffix) > 1 and suffix[:1] in ("e", "E"):
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    while exponent > 18:
        mantissa, exponent = mantissa * 1000, exponent - 3
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _overcommit_allowed(name: str) -> bool:
    """`helper.IsOvercommitAllowed`: native resources (no domain, or a kubernetes.io domain)
    other than hugepages; extended resources must have request == limit."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _resource_requirements(resources: Any, path: str) -> list[dict[str, str]]:
    """`ValidateResourceRequirements`' request/limit rules, with its field paths: the
    comparison errors are reported on `…resources.requests` (not the keyed entry)."""
    if not isinstance(resources, Mapping):
        return []
    raw_limits, raw_requests = resources.get("limits"), resources.get("requests")
    limits: Mapping[str, Any] = raw_limits if isinstance(raw_limits, Mapping) else {}
    requests: Mapping[str, Any] = raw_requests if isinstance(raw_requests, Mapping) else {}
    causes = []
    # Names, then negative quantities, on the keyed entry (`field.Path.Key`: `…requests[cpu]`).
    for field, entries in (("limits", limits), ("requests", requests)):
        for name, raw in entries.items():
            causes.extend(_resource_name(str(name), f"{path}.{field}[{name}]"))
            try:
                negative = Quantity(str(raw).strip()).value < 0
            except ValueError:
                continue
            if negative:
                causes.append(
                    cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{canonical_quantity(str(raw))}": '
                        "must be greater than or equal to 0",
                        f"{path}.{field}[{name}]",
                    )
                )
    for name, raw in requests.items():
        try:
            request = canonical_quantity(str(raw))
            request_value = Quantity(str(raw).strip()).value
            if name in limits:
                limit = canonical_quantity(str(limits[name]))
                limit_value = Quantity(str(limits[name]).strip()).value
        except ValueError:  # CelFunctionError included
            continue  # not a quantity: the decoder's business
        if name in limits:
            if request_value != limit_value and not _overcommit_allowed(name):
                message = f"must be equal to {name} limit of {limit}"
            elif request_value > limit_value:
                message = f"must be less than or equal to {name} limit of {limit}"
            else:
                continue
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{request}": {message}',
                    f"{path}.requests",
                )
            )
        elif not _overcommit_allowed(name):
            causes.append(
                cause(
                    "FieldValueRequired",
                    "Required value: Limit must be set for non overcommitable resources",
                    f"{path}.limits",
                )
            )
    return causes


_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
# `helper.IsStandardResourceName` beyond the container ones: quota resource names.
_QUOTA_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def _resource_name(name: str, path: str) -> list[dict[str, str]]:
    """`validateContainerResourceName` for an unqualified name (the value printed unquoted,
    as kube-apiserver prints a `ResourceName`)."""
    if "/" in name:
        return []
    causes = []
    container = name in _CONTAINER_RESOURCES or name.startswith("hugepages-")
    standard = container or name in _QUOTA_RESOURCES or name.startswith(("requests.", "limits."))
    if not standard:
        causes.append(
            cause(
                "FieldValueInvalid",
                f"Invalid value: {name}: must be a standard resource type or fully qualified",
                path,
            )
        )
    if not container:
        causes.append(
            cause(
                "FieldValueInvalid",
                f"Invalid value: {name}: must be a standard resource for containers",
                path,
            )
        )
    return causes


_BINDINGS = (
    "rbac.authorization.k8s.io/rolebindings",
    "rbac.authorization.k8s.io/clusterrolebindings",
)


def _role_ref(ref: Any, *, cluster: bool) -> list[dict[str, str]]:
    """`ValidateRoleBinding`'s roleRef rules (RBAC objects are stored, never enforced)."""
    ref = ref if isinstance(ref, Mapping) else {}
    causes = []
    group = "rbac.authorization.k8s.io"
    if ref.get("apiGroup") != group:
        causes.append(
            cause(
                "FieldValueNotSupported",
                f'Unsupported value: {json.dumps(ref.get("apiGroup", ""))}: supported values: "{group}"',
                "roleRef.apiGroup",
            )
        )
    kinds = ("ClusterRole",) if cluster else ("Role", "ClusterRole")
    if ref.get("kind") not in kinds:
        supported = ", ".join(f'"{k}"' for k in kinds)
        causes.append(
            cause(
                "FieldValueNotSupported",
                f"Unsupported value: {json.dumps(ref.get('kind', ''))}: supported values: {supported}",
                "roleRef.kind",
            )
        )
    if not ref.get("name"):
        causes.append(_required("roleRef.name"))
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
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {json.dumps(labels)}: `selector` does not match template `labels`",
                    "spec.template.metadata.labels",
                )
            )
        causes.extend(_pod_spec(template.get("spec"), "spec.template.spec"))
        return causes
    if rid in _BINDINGS:
        return _role_ref(obj.get("roleRef"), cluster=rid.endswith("/clusterrolebindings"))
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
            return [
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {json.dumps(new_selector)}: field is immutable",
                    "spec.selector",
                )
            ]
    if rid in _BINDINGS and old.get("roleRef") != new.get("roleRef"):
        raw_ref = new.get("roleRef")
        ref: Mapping[str, Any] = raw_ref if isinstance(raw_ref, Mapping) else {}
        shown = ", ".join(
            f"{go}:{json.dumps(str(ref.get(key, '')))}"
            for go, key in (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
        )
        return [
            cause(
                "FieldValueInvalid",
                f"Invalid value: rbac.RoleRef{{{shown}}}: cannot change roleRef",
                "roleRef",
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
