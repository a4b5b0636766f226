"""CRD structural schemas: pruning, defaults, validation, CEL (stub)."""

from __future__ import annotations

from typing import Any

from localcluster.types import ResourceInfo

__all__ = ["prepare_custom_object", "validate_builtin", "validate_crd"]


def prepare_custom_object(
    info: ResourceInfo,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    field_validation: str,
) -> tuple[dict[str, Any], list[str]]:
    """The pruned, defaulted object and warnings; raises ApiError 400/422."""
    return obj, []


def validate_builtin(
    info: ResourceInfo, obj: dict[str, Any], *, field_validation: str
) -> list[str]:
    """Warnings for unknown fields of a built-in kind; raises ApiError 400 when Strict."""
    return []


def validate_crd(crd: dict[str, Any]) -> None:
    """Raise ApiError 422 for a CRD the real server would refuse."""
    return None
