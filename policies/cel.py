"""The CRDs' CEL rules (`x-kubernetes-validations`): the policy a cluster enforces on its own.

The webhook is the primary enforcer, but when it is down (or not installed) the API server
still validates against the CRD. Every rule of `policies` that CEL can express is written here
as data, next to the schema node it guards, and `schema_with_rules(kind)` attaches them to
`policies.schema.openapi_schema(kind)` for `trainops crds`. Single-field constraints (enums,
minimum, maximum, pattern, maxItems, maxLength) are plain OpenAPI keywords in
`policies.schema`; only rules across fields or over lists live here.

Rules run on the stored object, i.e. after the mutating webhook and the schema defaults, so
replica types are already lower case and `replicas`/`restartPolicy` are set: a server applies
the schema's defaults to the request and to the old object it reads from etcd alike, and
`evaluate` does the same. `tests/policies/test_cel.py` evaluates every rule with cel-python on
the same fixtures as `policies.admit` and requires the same verdict, with the webhook's words.

Cost: a real API server estimates each rule's worst case from the schema and refuses CRDs over
budget. Lists a rule iterates carry `maxItems` (replicaSpecs and debug/resume specs: one entry
per type) and the strings it compares carry `maxLength` (an enum has none: enum strings are
compared, never concatenated); the resume-specs rule compares command/args lists bounded by
`MAX_COMMAND_ITEMS` items of `MAX_ARG_LENGTH` bytes. The main-container rule iterates the pod's
`containers`, which Kubernetes leaves unbounded, so the replica template bounds them
(`schema.MAX_CONTAINERS`).

Runtime cost (issue #19): kube-apiserver evaluates every rule on every write of a job, status
writes included (its status strategy validates the whole object, the unchanged spec too). An
evaluation plans the rule's whole program again (so a rule costs by its size, even where it
short-circuits), and every field it reads copies the schemas of all properties of the object
read from; the number of evaluations matters least. So: rules over the replicas sit on the
list (planned once, not once per replica type), one per reason, cases told apart by a
`messageExpression` (run only on failure); a transition rule comparing one field sits on that
field (`self == oldSelf`, no read, evaluated only where both objects have it); the
main-container rule sits on `containers` (read through a replica, `containers` would copy
PodSpec's 40 property schemas per replica). Measured in docs/PERFORMANCE.md.

Transition rules (`oldSelf`) keep what `policies.update` freezes where the comparison is cheap:
replica types and their order, each type's `replicas` and `restartPolicy`, the scheduler, and
`runMode.pause.resumeSpecs`.

Not expressible here (webhook only): quantities (limits >= requests), the derived-name length
(it depends on the largest replica index), and immutability of replica templates and of
`runMode.debug` (comparing whole pod templates is too costly for the estimator; an empty
`debug: {}` equals an absent one to the webhook, which CEL on objects cannot say cheaply).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from typing import Any

from policies import schema as schema_mod
from policies import update
from policies.fieldpath import ErrorType, FieldError, Path

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
    failure, as it does on a server. Both objects get the schema's defaults first, as on a
    server (it defaults the request and the old object it reads from etcd alike), so rules
    read defaulted fields (`replicas`, `restartPolicy`) without `has()`.
    """
    schema = _schema(kind)
    obj = _with_defaults(schema, obj)
    old = None if old is None else _with_defaults(schema, old)
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
# The webhook's own words (policies.update), so a cluster without the webhook says the same.
_IMMUTABLE = update.IMMUTABLE_DETAIL
_IMMUTABLE_RESUME = update.RESUME_IMMUTABLE_DETAIL
_IMMUTABLE_TYPES = update.TYPES_IMMUTABLE_DETAIL


def _quote(text: str) -> str:
    """`text` as a CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pick(cases: list[tuple[str, str]], last: str) -> str:
    """A messageExpression: the message of the first failing case (`ok`, message), else `last`."""
    out = _quote(last)
    for ok, message in reversed(cases):
        out = f"!({ok}) ? {_quote(message)} : {out}"
    return out


@cache
def _rules(kind: str) -> dict[Location, tuple[Rule, ...]]:
    if kind not in schema_mod.KIND_REPLICA_TYPES:
        raise ValueError(f"unknown training-job kind {kind!r}")
    frozen = _value_immutable(_IMMUTABLE)
    return {
        _SPEC: (_mode_types(), _spec_immutable()),
        ("spec", "scheduler", "t9kScheduler"): (frozen,),
        ("spec", "runMode", "pause", "resumeSpecs"): (_value_immutable(_IMMUTABLE_RESUME),),
        _REPLICAS: (
            _replicas_required(kind),
            _replica_counts(kind),
            Rule(
                "self.map(r, r.type) == oldSelf.map(r, r.type)",
                _IMMUTABLE_TYPES,
                "FieldValueForbidden",
            ),
        ),
        # On the scalars themselves (items pair up by `type` on a server).
        (*_REPLICA, "replicas"): (frozen,),
        (*_REPLICA, "restartPolicy"): (frozen,),
        _CONTAINERS: (_main_container(schema_mod.MAIN_CONTAINERS[kind]),),
    }


def _replicas_required(kind: str) -> Rule:
    """What the list must hold: the master type, and a pod template with a spec in every
    replica (the pod schema then requires `containers`, where `_main_container` runs)."""
    if kind == "TensorFlowTrainingJob":
        master = "self.exists(r, r.type == 'chief' || r.type == 'worker' && r.replicas > 0)"
        master_message = (
            "a chief (1 replica) or at least 1 worker replica is required: "
            "the chief, else worker 0, is the master"
        )
    else:
        master = "self.exists(r, r.type == 'master')"
        master_message = 'a replica spec of type "master" with 1 replica is required'
    has_master = f"size(self) == 0 || {master}"
    return Rule(
        f"({has_master}) && self.all(r, has(r.template) && has(r.template.spec))",
        master_message,
        "FieldValueRequired",
        message_expression=_pick(
            [
                (has_master, master_message),
                ("self.all(r, has(r.template))", "a pod template for the replicas is required"),
            ],
            "a pod template with spec.containers is required",
        ),
    )


def _replica_counts(kind: str) -> Rule:
    """The master type's count (TensorFlow: chief exactly 1, evaluator at most 1)."""
    if kind == "TensorFlowTrainingJob":
        chief = "chief must have exactly 1 replica: it is the master of the job"
        return Rule(
            "self.all(r, r.type == 'chief' ? r.replicas == 1 : "
            "(r.type != 'evaluator' || r.replicas <= 1))",
            chief,
            message_expression=_pick(
                [("self.all(r, r.type != 'chief' || r.replicas == 1)", chief)],
                "evaluator may have at most 1 replica",
            ),
        )
    return Rule(
        "self.all(r, r.type != 'master' || r.replicas == 1)",
        "master must have exactly 1 replica: it is the master of the job",
    )


def _main_container(name: str) -> Rule:
    """On `containers` itself, not on the list or the replica: reading `containers` through a
    replica makes a server copy PodSpec's 40 property schemas per replica. Container names
    are unique (a list-map), so "one named X with an image" is "one named X" and "every X has
    an image"."""
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


def _mode_types() -> Rule:
    """Every debug/resume spec names a replica type of the job; one rule for both lists."""
    cases = []
    for section, key in (("debug", "replicaSpecs"), ("pause", "resumeSpecs")):
        specs = f"self.runMode.{section}.{key}"
        cases.append(
            (
                f"!has(self.runMode.{section}) || !has({specs}) || "
                f"{specs}.all(d, self.replicaSpecs.exists(r, r.type == d.type))",
                f"each {section} {key} type must be a replica type of this job",
            )
        )
    ok = " && ".join(f"({c})" for c, _ in cases)
    return Rule(
        f"!has(self.runMode) || ({ok})",
        cases[0][1],
        field_path=".runMode",
        message_expression=_pick(cases[:1], cases[1][1]),
    )


def _spec_immutable() -> Rule:
    """The scheduler and the resume specs neither added nor removed (an empty `scheduler: {}`
    or `resumeSpecs: []` counts as absent, as to the webhook); one rule. Their values, where
    both objects have them, are compared by the rules on the nodes themselves
    (`_value_immutable`), which a job without them never evaluates."""

    def scheduler(root: str) -> str:
        return f"(has({root}.scheduler) && has({root}.scheduler.t9kScheduler))"

    def resume(root: str) -> str:
        specs = f"{root}.runMode.pause.resumeSpecs"
        return (
            f"(has({root}.runMode) && has({root}.runMode.pause) && has({specs}) && "
            f"size({specs}) > 0)"
        )

    same_scheduler = f"{scheduler('self')} == {scheduler('oldSelf')}"
    return Rule(
        f"{same_scheduler} && {resume('self')} == {resume('oldSelf')}",
        _IMMUTABLE,
        "FieldValueForbidden",
        message_expression=_pick([(same_scheduler, _IMMUTABLE)], _IMMUTABLE_RESUME),
    )


def _value_immutable(message: str) -> Rule:
    """On the node itself: no field read, and evaluated only where the node exists."""
    return Rule("self == oldSelf", message, "FieldValueForbidden")


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


@cache
def _schema(kind: str) -> dict[str, Any]:
    """The schema `evaluate` defaults by (one copy per kind; only read)."""
    return schema_mod.openapi_schema(kind)


def _with_defaults(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's `default`s filled in where a property is missing (a copy)."""
    if isinstance(value, dict):
        out = dict(value)
        for name, sub in schema.get("properties", {}).items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = _with_defaults(sub, out[name])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_with_defaults(schema["items"], item) for item in value]
    return value


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
