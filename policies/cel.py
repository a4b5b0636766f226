"""The CRDs' CEL rules (`x-kubernetes-validations`): the policy a cluster enforces on its own.

The webhook is the primary enforcer, but when it is down (or not installed) the API server
still validates against the CRD. Every rule of `policies` that CEL can express is written here
as data, next to the schema node it guards, and `schema_with_rules(kind)` attaches them to
`policies.schema.openapi_schema(kind)` for `trainops crds`. Single-field constraints (enums,
minimum, maximum, pattern, maxItems, maxLength) are plain OpenAPI keywords in
`policies.schema`; only rules across fields or over lists live here.

Rules run on the stored object, i.e. after the mutating webhook and the schema defaults, so
replica types are already lower case and `replicas` is set (the rules still guard with `has()`
where a default may be missing). `tests/policies/test_cel.py` evaluates every rule with
cel-python on the same fixtures as `policies.admit` and requires the same verdict.

Cost: a real API server estimates each rule's worst case from the schema and refuses CRDs over
budget. Lists a rule iterates carry `maxItems` (replicaSpecs and debug/resume specs: one entry
per type) and the strings it compares carry `maxLength`; the resumeSpecs transition rule
compares command/args lists bounded by `MAX_COMMAND_ITEMS` items of `MAX_ARG_LENGTH` bytes.
The main-container rule iterates the pod's `containers`, which Kubernetes leaves unbounded, so
the replica template bounds them (`schema.MAX_CONTAINERS`).

Runtime cost: kube-apiserver evaluates every rule on every write of a job, status writes
included (its status strategy validates the whole object, the unchanged spec too). A rule
costs a program planning per evaluation, and every field it reads costs a copy of the schemas
of all properties of the object read from; so rules sit on the smallest node that holds what
they read (the main-container rule on `containers`, not on the replica), and two cases of one
field are one rule whose `messageExpression` (run only on failure) says which case failed.

Transition rules (`oldSelf`) keep what `policies.update` freezes where the comparison is cheap:
replica types and their order, each type's `replicas` and `restartPolicy`, the scheduler, and
`runMode.pause.resumeSpecs`.

Not expressible here (webhook only): quantities (limits >= requests), the derived-name length
(it depends on the largest replica index), and immutability of replica templates and of
`runMode.debug` (comparing whole pod templates is too costly for the estimator; an empty
`debug: {}` equals an absent one to the webhook, which CEL on objects cannot say cheaply).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from policies import schema as schema_mod
from policies import update
from policies.fieldpath import ErrorType, FieldError, Path
from policies.tensorflow import TENSORFLOW
from policies.xgboost import XGBOOST

__all__ = ["Rule", "evaluate", "rules", "schema_with_rules"]

ITEMS = "*"
"""In a rule location, the items of an array node."""


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry."""

    rule: str
    message: str
    reason: str = "FieldValueInvalid"
    field_path: str = ""
    message_expression: str = ""
    """Evaluated (on the same `self`) only when the rule fails: one rule can then say which of
    its cases failed, where two rules would cost a server two evaluations on every write."""

    @property
    def is_transition(self) -> bool:
        return "oldSelf" in self.rule

    def as_validation(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message, "reason": self.reason}
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.message_expression:
            out["messageExpression"] = self.message_expression
        return out


Location = tuple[str, ...]


def rules(kind: str) -> dict[Location, tuple[Rule, ...]]:
    """The rules of `kind`, keyed by schema location (property names, `ITEMS` for items)."""
    return _rules(kind)


def schema_with_rules(kind: str) -> dict[str, Any]:
    """`openapi_schema(kind)` with every rule attached where it belongs (a fresh copy)."""
    schema = schema_mod.openapi_schema(kind)
    for location, entries in rules(kind).items():
        node = schema
        for step in location:
            node = node["items"] if step == ITEMS else node["properties"][step]
        node["x-kubernetes-validations"] = [r.as_validation() for r in entries]
    return schema


def evaluate(kind: str, obj: Any, old: Any = None) -> list[FieldError]:
    """Run the rules of `kind` on `obj` (and `old` for transition rules) with cel-python.

    What an API server does with the CRD's rules, for tests and offline checks: a rule runs
    on every node of its location that exists (transition rules only where the old object
    has the node too; list-map items pair up by key). An evaluation error counts as a
    failure, as it does on a server.
    """
    errors: list[FieldError] = []
    for location, entries in rules(kind).items():
        for path, node, old_node in _nodes(obj, old, location):
            for rule in entries:
                if rule.is_transition and old_node is _MISSING:
                    continue
                before = None if old_node is _MISSING else old_node
                if not _passes(rule.rule, node, before):
                    errors.append(_error(rule, path, _message(rule, node, before)))
    return errors


# --- the rules --------------------------------------------------------------------------------

_SPEC = ("spec",)
_REPLICAS = ("spec", "replicaSpecs")
_REPLICA = ("spec", "replicaSpecs", ITEMS)
_CONTAINERS = (*_REPLICA, "template", "spec", "containers")
_REPLICA_COUNT = "(has(self.replicas) ? self.replicas : 1)"
# The webhook's own words (policies.update), so a cluster without the webhook says the same.
_IMMUTABLE = update.IMMUTABLE_DETAIL
_IMMUTABLE_RESUME = update.RESUME_IMMUTABLE_DETAIL
_IMMUTABLE_TYPES = update.TYPES_IMMUTABLE_DETAIL
_KIND_SPECS = {k.kind: k for k in (TENSORFLOW, XGBOOST)}


@cache
def _rules(kind: str) -> dict[Location, tuple[Rule, ...]]:
    if kind not in schema_mod.KIND_REPLICA_TYPES:
        raise ValueError(f"unknown training-job kind {kind!r}")
    main = schema_mod.MAIN_CONTAINERS[kind]
    out: dict[Location, list[Rule]] = {
        _SPEC: [*_mode_type_rules(), _resume_specs_immutable(), _scheduler_immutable()],
        _REPLICAS: [_types_immutable()],
        _REPLICA: [
            _template_present(),
            *_replica_fields_immutable(_KIND_SPECS[kind].default_restart_policy),
        ],
        _CONTAINERS: [_main_container(main)],
    }
    if kind == "TensorFlowTrainingJob":
        out[_REPLICAS].append(
            Rule(
                "size(self) == 0 || self.exists(r, r.type == 'chief') || "
                f"self.exists(r, r.type == 'worker' && {_REPLICA_COUNT.replace('self', 'r')} > 0)",
                "a chief (1 replica) or at least 1 worker replica is required: "
                "the chief, else worker 0, is the master",
                "FieldValueRequired",
            )
        )
        # One rule for both types (each rule costs a server an evaluation per replica type on
        # every write, status writes included); the message says which type failed.
        out[_REPLICA].append(
            Rule(
                f"self.type == 'chief' ? {_REPLICA_COUNT} == 1 : "
                f"(self.type != 'evaluator' || {_REPLICA_COUNT} <= 1)",
                "chief must have exactly 1 replica: it is the master of the job",
                field_path=".replicas",
                message_expression="self.type == 'chief' ? "
                "'chief must have exactly 1 replica: it is the master of the job' : "
                "'evaluator may have at most 1 replica'",
            )
        )
    else:
        out[_REPLICAS].append(
            Rule(
                "size(self) == 0 || self.exists(r, r.type == 'master')",
                'a replica spec of type "master" with 1 replica is required',
                "FieldValueRequired",
            )
        )
        out[_REPLICA].append(
            Rule(
                f"self.type != 'master' || {_REPLICA_COUNT} == 1",
                "master must have exactly 1 replica: it is the master of the job",
                field_path=".replicas",
            )
        )
    return {k: tuple(v) for k, v in out.items() if v}


def _template_present() -> Rule:
    """The replica's pod spec exists, so the main-container rule (on `containers`, which the
    pod schema requires) runs. Reads two small objects: the replica and its template."""
    return Rule(
        "has(self.template) && has(self.template.spec)",
        "a pod template for the replicas is required",
        "FieldValueRequired",
        field_path=".template",
        message_expression="has(self.template) ? "
        "'a pod template with spec.containers is required' : "
        "'a pod template for the replicas is required'",
    )


def _main_container(name: str) -> Rule:
    """On `containers` itself, not on the replica: a server builds every property of an object
    each time a rule reads one of its fields, so reaching `containers` from the replica read the
    40-field PodSpec on every write, status writes included. `_template_present` and the pod
    schema (`containers` required) keep the node there; container names are unique (a
    list-map), so "one named X with an image" is "one named X" and "every X has an image"."""
    main = f"c.name == '{name}'"
    return Rule(
        f"self.exists(c, {main} && has(c.image) && size(c.image) > 0)",
        f'a container named "{name}" runs the training',
        "FieldValueRequired",
        message_expression=f"size(self) == 0 ? 'at least one container, named \"{name}\"' : "
        f"self.exists(c, {main}) ? "
        f"'the \"{name}\" container needs an image' : "
        f"'a container named \"{name}\" runs the training'",
    )


def _types_immutable() -> Rule:
    return Rule(
        "self.map(r, r.type) == oldSelf.map(r, r.type)",
        _IMMUTABLE_TYPES,
        "FieldValueForbidden",
    )


def _replica_fields_immutable(default_restart_policy: str) -> list[Rule]:
    """Per replica type (list-map items pair up by `type`): count and restart policy.

    Both sides are compared as defaulted: a job stored before a default existed (or while the
    mutating webhook was down) must not count as changed when an UPDATE adds that default.
    """
    count = "(has({0}.replicas) ? {0}.replicas : 1)"
    restart = f"(has({{0}}.restartPolicy) ? {{0}}.restartPolicy : '{default_restart_policy}')"
    return [
        Rule(
            f"{count.format('self')} == {count.format('oldSelf')}",
            _IMMUTABLE,
            "FieldValueForbidden",
            field_path=".replicas",
        ),
        Rule(
            f"{restart.format('self')} == {restart.format('oldSelf')}",
            _IMMUTABLE,
            "FieldValueForbidden",
            field_path=".restartPolicy",
        ),
    ]


def _scheduler_immutable() -> Rule:
    def present(root: str) -> str:
        return f"(has({root}.scheduler) && has({root}.scheduler.t9kScheduler))"

    return Rule(
        f"{present('self')} == {present('oldSelf')} && (!{present('self')} || "
        "self.scheduler.t9kScheduler == oldSelf.scheduler.t9kScheduler)",
        _IMMUTABLE,
        "FieldValueForbidden",
        field_path=".scheduler",
    )


def _mode_type_rules() -> list[Rule]:
    out = []
    for section, key in (("debug", "replicaSpecs"), ("pause", "resumeSpecs")):
        specs = f"self.runMode.{section}.{key}"
        out.append(
            Rule(
                f"!has(self.runMode) || !has(self.runMode.{section}) || !has({specs}) || "
                f"({specs}.all(d, has(self.replicaSpecs) && "
                "self.replicaSpecs.exists(r, r.type == d.type)))",
                f"each {section} {key} type must be a replica type of this job",
                "FieldValueInvalid",
                field_path=f".runMode.{section}.{key}",
            )
        )
    return out


def _resume_specs_immutable() -> Rule:
    def present(root: str) -> str:
        specs = f"{root}.runMode.pause.resumeSpecs"
        return (
            f"has({root}.runMode) && has({root}.runMode.pause) && has({specs}) && size({specs}) > 0"
        )

    return Rule(
        f"({present('self')}) ? (({present('oldSelf')}) && "
        "self.runMode.pause.resumeSpecs == oldSelf.runMode.pause.resumeSpecs) : "
        f"!({present('oldSelf')})",
        _IMMUTABLE_RESUME,
        "FieldValueForbidden",
        field_path=".runMode.pause.resumeSpecs",
    )


# --- evaluation helpers -----------------------------------------------------------------------

_MISSING: Any = object()


def _nodes(obj: Any, old: Any, location: Location) -> list[tuple[Path, Any, Any]]:
    """Every node at `location` in `obj`, with its path and its old counterpart (or missing)."""
    found: list[tuple[Path, Any, Any]] = [(Path(), obj, _MISSING if old is None else old)]
    for step in location:
        nxt: list[tuple[Path, Any, Any]] = []
        for path, node, old_node in found:
            if step == ITEMS:
                if not isinstance(node, list):
                    continue
                for i, item in enumerate(node):
                    nxt.append((path.index(i), item, _pair(item, old_node)))
            elif isinstance(node, dict) and node.get(step) is not None:
                before = old_node.get(step, _MISSING) if isinstance(old_node, dict) else _MISSING
                nxt.append((path.child(step), node[step], _MISSING if before is None else before))
        found = nxt
    return found


def _pair(item: Any, old_list: Any) -> Any:
    """The old list-map item with the same `type` key (transition rules pair items by key)."""
    if not (isinstance(item, dict) and isinstance(old_list, list)):
        return _MISSING
    for before in old_list:
        if isinstance(before, dict) and before.get("type") == item.get("type"):
            return before
    return _MISSING


def _error(rule: Rule, path: Path, message: str) -> FieldError:
    for part in filter(None, rule.field_path.split(".")):
        path = path.child(part)
    reasons = {t.cause_reason: t for t in ErrorType}
    return FieldError(reasons.get(rule.reason, ErrorType.INVALID), path, message)


def _passes(rule: str, node: Any, old: Any) -> bool:
    """Evaluate one rule; a CEL error is a failure, as on a server."""
    result = _eval(rule, node, old)
    return not isinstance(result, Exception) and result is not None and bool(result)


def _message(rule: Rule, node: Any, old: Any) -> str:
    """The failed rule's message: its messageExpression's value (as a server: `message` when
    the expression fails or is not a string)."""
    if not rule.message_expression:
        return rule.message
    result = _eval(rule.message_expression, node, old)
    return str(result) if isinstance(result, str) and result else rule.message


def _eval(expression: str, node: Any, old: Any) -> Any:
    """Evaluate one expression on `self` (and `oldSelf`); None when cel-python raises."""
    from celpy.adapter import json_to_cel  # slow to load: only tests and tools evaluate rules

    activation = {"self": json_to_cel(node)}
    if old is not None:
        activation["oldSelf"] = json_to_cel(old)
    try:
        return _program(expression).evaluate(activation)
    except Exception:  # cel-python raises assorted errors for no-such-key and overloads
        return None


@cache
def _program(rule: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule))
