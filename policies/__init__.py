"""The one definition of a valid training job: defaults, rules and field errors.

Pure functions over plain dicts: no I/O, no clock, no Kubernetes client. The webhook,
`trainops check`, the GitOps pre-flight and the CRDs' CEL rules all come from here.

Contract (stable; other packages code against it):

- `default(obj) -> (defaulted_copy, json_patch_ops)`: never mutates `obj`; idempotent.
- `validate(obj, old=None) -> (errors, warnings)`: `obj` is the defaulted object; `old` is the
  stored object on UPDATE. Never raises, whatever the input.
- `admit(obj, old=None) -> Admission`: default, then validate the defaulted object.
- `is_training_job(obj)`, `GROUP`, `VERSION`, `KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.fieldpath import FieldError

__all__ = [
    "GROUP",
    "KINDS",
    "VERSION",
    "Admission",
    "FieldError",
    "admit",
    "default",
    "is_training_job",
    "validate",
]

GROUP = "batch.tensorstack.dev"
VERSION = "v1beta1"
KINDS = ("TensorFlowTrainingJob", "XGBoostTrainingJob")


@dataclass(frozen=True)
class Admission:
    """The verdict on one object: its defaulted form, the patch to it, and what is wrong."""

    obj: dict[str, Any]
    patch: list[dict[str, Any]]
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.errors


def is_training_job(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("kind") in KINDS
        and isinstance(obj.get("apiVersion"), str)
        and obj["apiVersion"].split("/")[0] == GROUP
    )


def default(obj: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Placeholder until the rules land: no defaults."""
    import copy

    return copy.deepcopy(obj), []


def validate(
    obj: dict[str, Any], old: dict[str, Any] | None = None
) -> tuple[list[FieldError], list[str]]:
    """Placeholder until the rules land: nothing is wrong."""
    return [], []


def admit(obj: dict[str, Any], old: dict[str, Any] | None = None) -> Admission:
    defaulted, patch = default(obj)
    errors, warnings = validate(defaulted, old)
    return Admission(defaulted, patch, errors, warnings)
