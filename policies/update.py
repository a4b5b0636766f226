"""UPDATE rules: what may change on a job that already exists.

Why these fields are frozen: the controller derives each replica's pods, headless Services,
`TF_CONFIG` (every peer's address) and XGBoost's `WORLD_SIZE`/`RANK` from `replicaSpecs` when it
creates them. Changing a template, a count or a type under running replicas would leave pods
that disagree with the spec and with each other; users expect a running job not to change
under them, so a different job means a new job. The scheduler's queue and priority are bound
when the replicas are queued. `runMode.debug` decides the replicas' commands at creation.
`runMode.pause.resumeSpecs` is immutable by the T9k documentation ("可以随时修改
spec.runMode.pause.enabled …但是不可以更改 spec.runMode.pause.resumeSpecs").

What stays mutable: `runMode.pause.enabled` (pause and resume at any time), `runPolicy`
(deadline, backoff limit and clean-up policy are read when they apply), `tensorboardSpec` (the
TensorBoard is a separate child object) and all of `metadata`.

Both objects are compared in defaulted form, so an object stored before a default existed does
not count as changed because of that default. Both, not only the stored one: `new` is defaulted
when our mutating webhook ran first, but not when only the validating configuration is
installed, when `policies.validate` is called on what a user wrote, or when a default is added
here before the mutating webhook serving it is rolled out; comparing a defaulted side with an
undefaulted one would call every default a change (`restartPolicy`, the main container's port
under `template`). Defaulting is idempotent, so an already defaulted `new` comes back unchanged
(and is not even copied: `plan_defaults` finds nothing to do).
"""

from __future__ import annotations

from typing import Any

from policies.defaults import default_with, plan_defaults
from policies.fieldpath import FieldError, Path, forbidden
from policies.kinds import KindSpec

__all__ = [
    "IMMUTABLE_DETAIL",
    "MUTABLE_FIELDS",
    "RESUME_IMMUTABLE_DETAIL",
    "TYPES_IMMUTABLE_DETAIL",
    "validate_update",
]

MUTABLE_FIELDS = (
    "spec.runMode.pause.enabled",
    "spec.runPolicy",
    "spec.tensorboardSpec",
)
_MAY_CHANGE = "only " + ", ".join(MUTABLE_FIELDS) + " may change"
# The messages, public so the CRD's CEL rules (policies.cel) say exactly the same.
IMMUTABLE_DETAIL = "field is immutable after creation; " + _MAY_CHANGE
TYPES_IMMUTABLE_DETAIL = "replica types and their order are immutable; " + _MAY_CHANGE
RESUME_IMMUTABLE_DETAIL = (
    "field is immutable: set resume specs when creating the job; "
    "spec.runMode.pause.enabled may be toggled freely"
)
_SPEC = Path.of("spec")
_ABSENT: Any = object()


def validate_update(kind: KindSpec, new: dict[str, Any], old: Any) -> list[FieldError]:
    """Forbidden errors for each frozen field that differs between `old` and `new`."""
    if not isinstance(old, dict):
        return []
    new_spec = _dict(_defaulted(kind, new).get("spec"))
    old_spec = _dict(_defaulted(kind, old).get("spec"))
    errors = _replica_spec_changes(new_spec.get("replicaSpecs"), old_spec.get("replicaSpecs"))
    if _get(new_spec, "scheduler") != _get(old_spec, "scheduler"):
        errors.append(forbidden(_SPEC.child("scheduler"), IMMUTABLE_DETAIL))
    new_mode, old_mode = _dict(new_spec.get("runMode")), _dict(old_spec.get("runMode"))
    if _get(new_mode, "debug") != _get(old_mode, "debug"):
        errors.append(forbidden(_SPEC.child("runMode", "debug"), IMMUTABLE_DETAIL))
    new_pause, old_pause = _dict(new_mode.get("pause")), _dict(old_mode.get("pause"))
    if _resume(new_pause) != _resume(old_pause):
        errors.append(
            forbidden(_SPEC.child("runMode", "pause", "resumeSpecs"), RESUME_IMMUTABLE_DETAIL)
        )
    return errors


def _defaulted(kind: KindSpec, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` in defaulted form: itself when it already is (the webhook's case), else a copy."""
    if not plan_defaults(kind, obj):
        return obj
    defaulted, _ = default_with(kind, obj)
    return defaulted if isinstance(defaulted, dict) else {}


def _replica_spec_changes(new: Any, old: Any) -> list[FieldError]:
    """Per replica type, per field: the most precise path that changed."""
    path = _SPEC.child("replicaSpecs")
    if not (isinstance(new, list) and isinstance(old, list)):
        return [] if new == old else [forbidden(path, IMMUTABLE_DETAIL)]
    old_by_type = {_type(item): item for item in old}
    if [_type(item) for item in new] != [_type(item) for item in old] or None in old_by_type:
        return [] if new == old else [forbidden(path, TYPES_IMMUTABLE_DETAIL)]
    errors: list[FieldError] = []
    for i, item in enumerate(new):
        before = old_by_type[_type(item)]
        if not (isinstance(item, dict) and isinstance(before, dict)):
            if item != before:
                errors.append(forbidden(path.index(i), IMMUTABLE_DETAIL))
            continue
        for key in sorted(set(item) | set(before)):
            if item.get(key, _ABSENT) != before.get(key, _ABSENT):
                errors.append(forbidden(path.index(i).child(key), IMMUTABLE_DETAIL))
    return errors


def _type(item: Any) -> str | None:
    rtype = item.get("type") if isinstance(item, dict) else None
    return rtype if isinstance(rtype, str) else None


def _resume(pause: dict[str, Any]) -> Any:
    specs = pause.get("resumeSpecs")
    return [] if specs is None else specs


def _get(container: dict[str, Any], key: str) -> Any:
    value = container.get(key)
    return None if value in (None, {}) else value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
