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

__all__ = ["container_resources", "container_resources_ok", "validate_resources"]


def container_resources_ok(resources: dict[str, Any]) -> bool:
    """Whether one container's `resources` has no error: the fast path of every admission,
    which builds no field path (`container_resources` names the errors when there are some).

    Amounts written as strings (what YAML and JSON jobs hold) are judged one resource at a
    time by a cached verdict on the (name, request, limit) strings, the same judgement `_check`
    makes on the parsed values; anything else (numbers, nulls) goes through `_check` itself.
    """
    requests = resources.get("requests")
    limits = resources.get("limits")
    if not isinstance(requests, dict):
        requests = _EMPTY
    if not isinstance(limits, dict):
        limits = _EMPTY
    paired = 0
    for name, limit in limits.items():
        request = requests.get(name)
        if type(limit) is not str:
            return not _check(resources, _NO_PATH)
        if type(request) is str:
            if not _pair_ok(name, request, limit):
                return False
            paired += 1
        elif request is not None or name in requests:
            return not _check(resources, _NO_PATH)
        elif _quantity_of_string(name, limit)[0] is None:
            return False
    if paired == len(requests):
        return True  # every request has a limit (the usual case)
    for name, request in requests.items():
        if name in limits:
            continue
        if type(request) is not str:
            return not _check(resources, _NO_PATH)
        if not _request_alone_ok(name, request):
            return False
    return True


def container_resources(
    resources: dict[str, Any], pod_path: Path, list_name: str, index: int
) -> list[FieldError]:
    """The errors of one container's `resources`; `pod_path` is its pod spec's path."""
    container = pod_path.child(list_name).index(index).child("resources")
    return _check(resources, lambda section, name: container.child(section).key(name))


def validate_resources(resources: Any, path: Path) -> list[FieldError]:
    """One `resources` object (requests, limits) outside a pod spec, e.g. the TensorBoard's."""
    if not isinstance(resources, dict) or not resources:
        return []
    return _check(resources, lambda section, name: path.child(section).key(name))


def _no_path(section: str, name: str) -> Path:
    return _ROOT


_ROOT = Path()
_NO_PATH = _no_path
_EMPTY: dict[str, Any] = {}


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


@lru_cache(maxsize=1024)
def _pair_ok(name: str, request: str, limit: str) -> bool:
    """Both amounts well formed, and the limit one `_check` accepts for that request."""
    low, high = _quantity_of_string(name, request)[0], _quantity_of_string(name, limit)[0]
    if low is None or high is None or high < low:
        return False
    return high == low or _overcommit_allowed(name)


@lru_cache(maxsize=1024)
def _request_alone_ok(name: str, request: str) -> bool:
    """A well-formed request without a limit, of a resource that may be overcommitted."""
    return _quantity_of_string(name, request)[0] is not None and _overcommit_allowed(name)


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
