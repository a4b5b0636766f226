"""One entry point per admission step: `default`, `validate`, `admit`, for either kind.

Why one module dispatches both kinds: the webhook, `trainops check` and the GitOps pre-flight
must not care which kind they hold. The kind picks a `KindSpec` (`tensorflow.TENSORFLOW`,
`xgboost.XGBOOST`); everything else is shared.

Validation runs two layers and merges them so that nothing is said twice:

1. `policies.structural.check` — strict decoding against the CRD schema: unknown fields and
   values of the wrong JSON type;
2. the semantic rules (`rules_common`, the kind's master rule, `update` on UPDATE). They skip
   values of the wrong type, and any rule error at or below a path the structural layer already
   found broken is dropped (an unknown-field report is about the unknown child only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies import podsecurity, structural
from policies.advice import warnings_for
from policies.defaults import default_with, plan_defaults
from policies.fieldpath import ErrorType, FieldError, Path, invalid, not_supported, required
from policies.kinds import KindSpec, replicas_of
from policies.rules_common import (
    job_types,
    validate_name,
    validate_replica_specs,
    validate_run_mode,
    validate_run_policy,
    validate_scheduler,
    validate_tensorboard,
)
from policies.tensorflow import TENSORFLOW
from policies.update import validate_update
from policies.xgboost import XGBOOST

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "MUTATING_WEBHOOK",
    "SPECS",
    "VALIDATING_WEBHOOK",
    "VERSION",
    "Admission",
    "admit",
    "default",
    "default_patch",
    "is_training_job",
    "validate",
]

GROUP = "batch.tensorstack.dev"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
SPECS: dict[str, KindSpec] = {s.kind: s for s in (TENSORFLOW, XGBOOST)}
KINDS = tuple(SPECS)
MUTATING_WEBHOOK = f"default.trainingjobs.{GROUP}"
VALIDATING_WEBHOOK = f"validate.trainingjobs.{GROUP}"
"""The webhooks' names (deploy/webhook/webhooks.yaml): the API server quotes the validating
one in a denial (`admission webhook "<name>" denied the request: …`)."""


@dataclass(frozen=True)
class Admission:
    """The verdict on one object: its defaulted form, the patch to it, and what is wrong."""

    obj: Any  # the defaulted job; any other JSON value is returned as it came
    patch: list[dict[str, Any]]
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.errors


def is_training_job(obj: Any) -> bool:
    """A TensorFlow or XGBoost training job of our group (any version)."""
    return (
        isinstance(obj, dict)
        and obj.get("kind") in KINDS
        and isinstance(obj.get("apiVersion"), str)
        and obj["apiVersion"].split("/")[0] == GROUP
    )


def default(obj: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A defaulted copy of `obj` and the RFC 6902 patch to it; `obj` is never mutated.

    Objects of other kinds, and parts of the wrong type, are copied unchanged.
    """
    raw_kind = obj.get("kind") if isinstance(obj, dict) else None
    return default_with(SPECS.get(raw_kind) if isinstance(raw_kind, str) else None, obj)


def default_patch(obj: Any) -> list[dict[str, Any]]:
    """The patch `default(obj)` returns, without building the defaulted copy.

    For the mutating webhook, which answers with the patch only: the deep copy is most of the
    cost of `default`. `obj` is never mutated.
    """
    raw_kind = obj.get("kind") if isinstance(obj, dict) else None
    kind = SPECS.get(raw_kind) if isinstance(raw_kind, str) else None
    if kind is None:
        return []
    assert isinstance(obj, dict)
    return plan_defaults(kind, obj)


def validate(
    obj: Any, old: Any = None, *, schema_checked: bool = False, pod_security: str | None = None
) -> tuple[list[FieldError], list[str]]:
    """Errors and warnings for a defaulted job; `old` is the stored object on UPDATE.

    `pod_security` is the Pod Security level the job's namespace enforces (`baseline`,
    `restricted`; None or `privileged`: none): on CREATE, a replica template that breaks it is
    an error (`policies.podsecurity`). Not on UPDATE: the templates are immutable, and a job
    stored before its namespace was labelled must still be paused, resumed and edited (Pod
    Security admission likewise lets a pod's update through when its spec is unchanged).

    `schema_checked=True` skips the structural layer (unknown fields, JSON types) for an object
    that has already passed the CRD's schema: the API server validates against it before it
    calls validating webhooks, so repeating the walk there would only cost time (it is half of
    the work for a typical job). The semantic rules run either way and skip ill-typed values.
    """
    if not isinstance(obj, dict):
        return [invalid(Path(), _type_name(obj), "a training job must be a JSON object")], []
    raw_kind = obj.get("kind")
    kind = SPECS.get(raw_kind) if isinstance(raw_kind, str) else None
    if kind is None:
        return [not_supported(Path.of("kind"), raw_kind, KINDS)], []
    try:
        return _validate(kind, obj, old, schema_checked, pod_security)
    except RecursionError:
        # Only absurdly deep nesting gets here (comparing two such objects on UPDATE).
        return [invalid(Path(), "object", "is nested too deeply to be checked")], []


def _validate(
    kind: KindSpec, obj: dict[str, Any], old: Any, schema_checked: bool, pod_security: str | None
) -> tuple[list[FieldError], list[str]]:
    errors: list[FieldError] = []
    if obj.get("apiVersion") != API_VERSION:
        errors.append(not_supported(Path.of("apiVersion"), obj.get("apiVersion"), (API_VERSION,)))
    rules, warnings = _rules(kind, obj, old)
    if pod_security is not None and old is None:
        rules.extend(podsecurity.check(obj, pod_security))
    if schema_checked:
        errors.extend(rules)
        return errors, warnings
    found = structural.check(obj)
    broken = [e.path.parts for e in found if not _is_unknown_field(e)]
    errors.extend(found)
    errors.extend(e for e in rules if not _under_any(e.path.parts, broken))
    return errors, warnings


def admit(obj: Any, old: Any = None, *, pod_security: str | None = None) -> Admission:
    """Default, then validate the defaulted object: the whole admission verdict."""
    defaulted, patch = default(obj)
    errors, warnings = validate(defaulted, old, pod_security=pod_security)
    return Admission(defaulted, patch, errors, warnings)


def _rules(kind: KindSpec, obj: dict[str, Any], old: Any) -> tuple[list[FieldError], list[str]]:
    replicas = replicas_of(obj)
    spec = obj.get("spec")
    tensorboard = isinstance(spec, dict) and spec.get("tensorboardSpec") is not None
    errors = validate_name(kind, obj.get("metadata"), replicas, tensorboard=tensorboard)
    if spec is None:
        errors.append(required(Path.of("spec"), "a training job needs a spec"))
        return errors, []
    if not isinstance(spec, dict):
        return errors, []
    errors.extend(validate_replica_specs(kind, spec, replicas))
    if replicas:
        errors.extend(kind.validate_masters(replicas))
    errors.extend(validate_run_policy(spec))
    if "scheduler" in spec:  # (each part's rules only when the part is there)
        errors.extend(validate_scheduler(spec))
    if tensorboard:
        errors.extend(validate_tensorboard(spec))
    if isinstance(spec.get("runMode"), dict):  # (the job's types are needed only then)
        errors.extend(validate_run_mode(spec, job_types(kind, replicas)))
    if old is not None:
        errors.extend(validate_update(kind, obj, old))
    return errors, warnings_for(kind, spec, replicas)


def _is_unknown_field(error: FieldError) -> bool:
    return error.type is ErrorType.FORBIDDEN and error.detail.startswith("unknown field")


def _under_any(parts: tuple[Any, ...], prefixes: list[tuple[Any, ...]]) -> bool:
    return any(parts[: len(p)] == p for p in prefixes)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), type(value).__name__
    )
