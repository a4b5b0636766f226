"""Container resources: every quantity well formed and non-negative, limits >= requests.

Also Kubernetes' rules for resources that cannot be overcommitted (extended resources such as
`nvidia.com/gpu`, and huge pages): a request needs a limit, and the two must be equal;
extended resources come in whole units.

Why here and not left to the API server: pods are created by the controller long after the job
was admitted, so a `limits.memory: 1Gi` / `requests.memory: 2Gi` mistake would otherwise surface
as a job stuck in Pending with an event on a pod the user never wrote. Checking at admission
names the field in the file the user edits. Comparison uses exact quantity values
(`policies.quantity`), so `1G` vs `953Mi` is decided the way the API server decides it.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from policies.fieldpath import FieldError, Path, invalid, required
from policies.quantity import QuantityError, parse_quantity

__all__ = ["validate_pod_resources", "validate_resources"]

_CONTAINER_LISTS = ("initContainers", "containers")


def validate_pod_resources(
    pod_spec: dict[str, Any], pod_path: Callable[[], Path]
) -> list[FieldError]:
    """Resource errors of every container and init container of a pod spec.

    `pod_path()` gives the pod spec's path; it is called only when there is an error to report,
    since building paths would dominate the cost of checking a valid job.
    """
    errors: list[FieldError] = []
    for list_name in _CONTAINER_LISTS:
        containers = pod_spec.get(list_name)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            if isinstance(container, dict):
                resources = container.get("resources")
                if isinstance(resources, dict) and resources:
                    errors.extend(_validate_resources(resources, pod_path, list_name, i))
    return errors


def validate_resources(resources: Any, path: Path) -> list[FieldError]:
    """One `resources` object (requests, limits) outside a pod spec, e.g. the TensorBoard's."""
    if not isinstance(resources, dict) or not resources:
        return []
    return _check(resources, lambda section, name: path.child(section).key(name))


def _validate_resources(
    resources: dict[str, Any], pod_path: Callable[[], Path], list_name: str, index: int
) -> list[FieldError]:
    """One container's resources; paths are built only for errors (this runs per container)."""

    def at(section: str, name: str) -> Path:
        return pod_path().child(list_name).index(index).child("resources", section).key(name)

    return _check(resources, at)


def _check(resources: dict[str, Any], at: Callable[[str, str], Path]) -> list[FieldError]:

    errors: list[FieldError] = []
    requests = _parse_section(resources, "requests", at, errors)
    limits = _parse_section(resources, "limits", at, errors)
    for name, limit in limits.items():
        request = requests.get(name)
        if request is None:
            continue
        if limit < request:
            shown = _show(resources["requests"][name])
            detail = f"must be greater than or equal to {name} request of {shown}"
        elif limit > request and not _overcommit_allowed(name):
            shown = _show(resources["requests"][name])
            detail = f"must equal {name} request of {shown}: it cannot be overcommitted"
        else:
            continue
        errors.append(invalid(at("limits", name), resources["limits"][name], detail))
    if limits.keys() >= requests.keys():
        return errors  # every request has a limit (the usual case)
    for name in requests:
        if name not in limits and not _overcommit_allowed(name):
            shown = _show(resources["requests"][name])
            detail = (
                f"a limit equal to the request of {shown} is required: it cannot be overcommitted"
            )
            errors.append(required(at("limits", name), detail))
    return errors


def _parse_section(
    resources: dict[str, Any],
    section: str,
    at: Callable[[str, str], Path],
    errors: list[FieldError],
) -> dict[str, Decimal]:
    """The well-formed quantities of `requests` or `limits`; errors for the others."""
    values = resources.get(section)
    if not isinstance(values, dict):
        return {}
    out: dict[str, Decimal] = {}
    for name, raw in values.items():
        amount, problem = (
            _quantity_of_string(name, raw) if type(raw) is str else _quantity(name, raw)
        )
        if amount is None:
            errors.append(invalid(at(section, name), raw, problem))
        else:
            out[name] = amount
    return out


def _quantity(name: str, raw: Any) -> tuple[Decimal | None, str]:
    """`(value, "")` when `raw` is a usable amount of resource `name`, else `(None, why)`."""
    try:
        amount = parse_quantity(raw)
    except QuantityError as e:
        return None, str(e)
    if amount < 0:
        return None, "must be greater than or equal to 0"
    if _is_extended(name) and amount != amount.to_integral_value():
        return None, "must be an integer"
    return amount, ""


@lru_cache(maxsize=1024)
def _quantity_of_string(name: str, raw: str) -> tuple[Decimal | None, str]:
    """Cached like `quantity.parse_quantity`: jobs repeat the same few (name, amount) pairs."""
    return _quantity(name, raw)


@lru_cache(maxsize=256)
def _is_native(name: str) -> bool:
    """No domain, or the kubernetes.io domain (`cpu`, `memory`, `hugepages-2Mi`, …)."""
    domain, slash, _ = name.partition("/")
    return not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")


@lru_cache(maxsize=256)
def _is_extended(name: str) -> bool:
    """A device-plugin resource such as `nvidia.com/gpu` (apimachinery's extended resource)."""
    return not _is_native(name) and not name.startswith("requests.")


@lru_cache(maxsize=256)
def _overcommit_allowed(name: str) -> bool:
    """Kubernetes lets native resources other than huge pages be requested below their limit."""
    return _is_native(name) and not name.startswith("hugepages-")


def _show(raw: Any) -> str:
    return raw if isinstance(raw, str) else repr(raw)
