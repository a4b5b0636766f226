"""Container resources: every quantity well formed and non-negative, limits >= requests.

Why here and not left to the API server: pods are created by the controller long after the job
was admitted, so a `limits.memory: 1Gi` / `requests.memory: 2Gi` mistake would otherwise surface
as a job stuck in Pending with an event on a pod the user never wrote. Checking at admission
names the field in the file the user edits. Comparison uses exact quantity values
(`policies.quantity`), so `1G` vs `953Mi` is decided the way the API server decides it.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from policies.fieldpath import FieldError, Path, invalid
from policies.quantity import QuantityError, parse_quantity

__all__ = ["validate_pod_resources"]

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


def _validate_resources(
    resources: dict[str, Any], pod_path: Callable[[], Path], list_name: str, index: int
) -> list[FieldError]:
    """One container's resources; paths are built only for errors (this runs per container)."""

    def at(section: str, name: str) -> Path:
        return pod_path().child(list_name).index(index).child("resources", section, name)

    errors: list[FieldError] = []
    parsed: dict[str, dict[str, Decimal]] = {}
    for section in ("requests", "limits"):
        values = resources.get(section)
        parsed[section] = {}
        if not isinstance(values, dict):
            continue
        for name, raw in values.items():
            try:
                amount = parse_quantity(raw)
            except QuantityError as e:
                errors.append(invalid(at(section, name), raw, str(e)))
                continue
            if amount < 0:
                errors.append(invalid(at(section, name), raw, "must be greater than or equal to 0"))
                continue
            parsed[section][name] = amount
    for name, limit in parsed["limits"].items():
        request = parsed["requests"].get(name)
        if request is not None and limit < request:
            raw_request = resources["requests"][name]
            errors.append(
                invalid(
                    at("limits", name),
                    resources["limits"][name],
                    f"must be greater than or equal to {name} request of {_show(raw_request)}",
                )
            )
    return errors


def _show(raw: Any) -> str:
    return raw if isinstance(raw, str) else repr(raw)
