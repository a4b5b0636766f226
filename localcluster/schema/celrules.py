"""`x-kubernetes-validations`: CEL rules of CRD schemas, evaluated with cel-python.

Semantics follow the API server: a rule runs on every node of its schema location that is
present in the (pruned, defaulted) object, with `self` bound to the node; a transition rule (one
that mentions `oldSelf`) runs only on update and only where the old object has the correlated
node — correlation goes through object properties, map keys and items of
`x-kubernetes-list-type: map` lists (by their keys), never through atomic lists or sets. A failed
rule becomes a field error with the rule's `reason` (default FieldValueInvalid) at the node's path
plus the rule's `fieldPath`, carrying `messageExpression`'s result, else `message`, else
`failed rule: <rule>`. An evaluation error fails the rule (`Invalid value: "object": no such key:
x`).

Programs are compiled once per rule text (memoised), i.e. once per CRD in practice, with the
common Kubernetes CEL library functions of `celk8s` (strings, lists, regex, quantity). Not
implemented: the url/ip/cidr/format libraries and cost estimation. `optionalOldSelf` rules
also run on create, with `oldSelf` an optional (`hasValue()`, `value()`, `orValue(x)`). Errors carry
their node for validation ratcheting (`structural.ratchet`); transition rules are never
ratcheted.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
from pathlib import Path
from typing import Any

from localcluster.api.fielderrors import FieldError, MapKey, PathPart, render_path
from policies.fieldpath import json_type

__all__ = [
    "compile_error",
    "compile_program",
    "evaluate_rules",
    "field_path_parts",
    "has_rules",
    "is_transition_rule",
]

_MISSING: Any = object()
_OLD_SELF = re.compile(r"\boldSelf\b")


_ENV_LOCK = threading.Lock()


@functools.cache
def _environment() -> Any:
    """The cel-python environment, built once on first use (under a lock: the event loop and
    a worker thread may both ask first)."""
    with _ENV_LOCK:
        import celpy  # imported lazily, off the import path of every other module

        _seed_parser()
        return celpy.Environment()


def _seed_parser() -> None:
    """Give cel-python its Lark parser from an on-disk cache.

    Building the LALR tables of the CEL grammar takes 0.2–0.5 s per process (the first CRD
    validation paid it); loading them from a cache file takes ~20 ms. The cache lives in the
    user's cache directory, is keyed by Lark on the grammar, options and versions, and is
    written to a temporary name and renamed so concurrent processes never read half a file.
    Any failure leaves cel-python to build its parser itself.
    """
    import celpy.celparser
    import lark
    from celpy.celparser import CELParser

    if CELParser.CEL_PARSER is not None:
        return
    try:
        grammar = (Path(celpy.celparser.__file__).parent / "cel.lark").read_text()
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainops"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"cel-lark-{lark.__version__}.cache"
        target = final if final.exists() else folder / f".cel-lark-{os.getpid()}.tmp"
        CELParser.CEL_PARSER = lark.Lark(
            grammar,
            parser="lalr",
            start="expr",
            debug=True,
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": CELParser.ambiguous_literals},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
            tree_class=lark.Tree,
            cache=str(target),
        )
        if target != final:
            os.replace(target, final)
    except Exception:  # no cache (read-only home, changed library): cel-python builds it
        CELParser.CEL_PARSER = None


@functools.lru_cache(maxsize=4096)
def _program(expression: str) -> tuple[Any, str]:
    """(program, "") or (None, compile error)."""
    from localcluster.schema.celk8s import FUNCTIONS  # imports celpy: kept off the import path

    env = _environment()
    try:
        return env.program(env.compile(expression), functions=FUNCTIONS), ""
    except Exception as e:  # cel-python raises CELParseError and assorted others
        return None, " ".join(str(e).split())


def compile_program(expression: str) -> tuple[Any, str]:
    """A compiled cel-python program and "" (memoised), or None and the compile error."""
    return _program(expression)


def compile_error(expression: str) -> str:
    """The compile error of a rule, or "" when it compiles: syntax errors, and calls of
    functions neither standard CEL nor a Kubernetes library has (as the API server's type
    checker reports them)."""
    problem = _program(expression)[1]
    if problem:
        return problem
    unknown = sorted(_called_functions(expression) - _known_functions())
    if unknown:
        return f"ERROR: <input>: undeclared reference to '{unknown[0]}' (in container '')"
    return ""


# Standard CEL functions and macros, and every function of the Kubernetes CEL libraries
# (including the ones `celk8s` does not implement, which a real server accepts).
_STANDARD_AND_KUBERNETES = frozenset(
    {
        "all",
        "bool",
        "bytes",
        "contains",
        "double",
        "duration",
        "dyn",
        "endsWith",
        "exists",
        "exists_one",
        "filter",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getMonth",
        "getSeconds",
        "has",
        "int",
        "map",
        "matches",
        "size",
        "startsWith",
        "string",
        "timestamp",
        "type",
        "uint",
        # Kubernetes libraries: url, ip/cidr, format, strings v2, lists, optionals, semver
        "url",
        "isURL",
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "containsIP",
        "containsCIDR",
        "masked",
        "prefixLength",
        "format",
        "quote",
        "reverse",
        "of",
        "none",
        "hasValue",
        "value",
        "orValue",
        "or",
        "optMap",
        "optFlatMap",
        "semver",
        "isSemver",
        "major",
        "minor",
        "patch",
        "slice",
        "flatten",
        "distinct",
        "sort",
        "sortBy",
        "first",
        "last",
        "range",
    }
)


@functools.cache
def _known_functions() -> frozenset[str]:
    from localcluster.schema.celk8s import FUNCTIONS

    return _STANDARD_AND_KUBERNETES | frozenset(FUNCTIONS)


def _called_functions(expression: str) -> set[str]:
    """Names of the functions and methods an expression calls (from cel-python's parse tree)."""
    try:
        tree = _environment().compile(expression)
    except Exception:  # already reported as a compile error
        return set()
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and len(node.children) > 1:
            names.add(str(node.children[1]))
        elif node.data == "ident_arg" and node.children:
            names.add(str(node.children[0]))
    return names


def has_rules(schema: Any) -> bool:
    """Whether any node of the schema carries `x-kubernetes-validations`."""
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-validations"):
            return True
        return any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def evaluate_rules(obj: Any, old: Any, schema: dict[str, Any]) -> list[FieldError]:
    """Every failed rule of `schema` on `obj` (`old`: the stored object on update, else None)."""
    errors: list[FieldError] = []
    _walk(obj, _MISSING if old is None else old, schema, (), errors)
    return errors


def _walk(
    value: Any,
    old: Any,
    schema: dict[str, Any],
    path: tuple[PathPart, ...],
    errors: list[FieldError],
) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        error = _check(rule, value, old, schema, path)
        if error is not None:
            # Ratcheting looks at the rule's node; transition rules are never ratcheted.
            transition = bool(_OLD_SELF.search(str(rule.get("rule", ""))))
            errors.append(dataclasses.replace(error, node=None if transition else path))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            before = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            if key in props:
                _walk(item, before, props[key], (*path, key), errors)
            elif isinstance(extra, dict):
                _walk(item, before, extra, (*path, MapKey(key)), errors)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        keys = schema.get("x-kubernetes-list-map-keys") or []
        correlate = schema.get("x-kubernetes-list-type") == "map" and keys and isinstance(old, list)
        for i, item in enumerate(value):
            before = _MISSING
            if correlate and isinstance(item, dict):
                ident = {k: item.get(k) for k in keys}
                before = next(
                    (
                        o
                        for o in old
                        if isinstance(o, dict) and {k: o.get(k) for k in keys} == ident
                    ),
                    _MISSING,
                )
            _walk(item, before, items, (*path, i), errors)


def _check(
    rule: dict[str, Any], value: Any, old: Any, schema: dict[str, Any], path: tuple[PathPart, ...]
) -> FieldError | None:
    import celpy

    from localcluster.schema.celk8s import Optional

    text = str(rule.get("rule", ""))
    transition = bool(_OLD_SELF.search(text))
    optional_old = transition and bool(rule.get("optionalOldSelf"))
    if transition and old is _MISSING and not optional_old:
        return None
    program, problem = _program(text)
    activation: dict[str, Any] = {"self": celpy.json_to_cel(value)}
    if optional_old:
        # optionalOldSelf: the rule also runs on create; oldSelf is an optional value.
        activation["oldSelf"] = Optional(None if old is _MISSING else celpy.json_to_cel(old))
    elif transition:
        activation["oldSelf"] = celpy.json_to_cel(old)
    type_name = str(schema.get("type") or json_type(value))
    field = render_path((*path, *_field_path(str(rule.get("fieldPath") or ""))))
    if program is None:
        return FieldError.invalid(field, type_name, f"compilation failed: {problem}")
    try:
        result = program.evaluate(activation)
    except Exception as e:  # CELEvalError and friends
        return FieldError.invalid(field, type_name, _eval_message(e))
    if isinstance(result, Exception):
        return FieldError.invalid(field, type_name, _eval_message(result))
    if result is True or (isinstance(result, bool) and result):
        return None
    if not isinstance(result, bool) and not hasattr(result, "__bool__"):
        return FieldError.invalid(field, type_name, "rule did not evaluate to a bool")
    if bool(result):
        return None
    message = _message(rule, activation) or f"failed rule: {text}"
    reason = str(rule.get("reason") or "FieldValueInvalid")
    if reason == "FieldValueRequired":
        return FieldError.required(field, message)
    if reason == "FieldValueForbidden":
        return FieldError.forbidden(field, message)
    if reason == "FieldValueDuplicate":
        return FieldError("FieldValueDuplicate", field, f'Duplicate value: "{type_name}"')
    return FieldError.invalid(field, type_name, message)


def _message(rule: dict[str, Any], activation: dict[str, Any]) -> str:
    expression = rule.get("messageExpression")
    if expression:
        program, _ = _program(str(expression))
        if program is not None:
            try:
                result = program.evaluate(activation)
            except Exception:  # fall back to `message`, as the API server does
                result = None
            if isinstance(result, str) and result.strip():
                return " ".join(str(result).split())
    return str(rule.get("message") or "")


def is_transition_rule(rule: str) -> bool:
    """Whether a rule compares with the old object (mentions `oldSelf`)."""
    return bool(_OLD_SELF.search(rule))


def field_path_parts(field_path: str) -> list[PathPart]:
    """The steps of a rule's `fieldPath` (`.a.b`, `['a.b']`, `[0]`)."""
    return _field_path(field_path)


def _field_path(field_path: str) -> list[PathPart]:
    parts: list[PathPart] = []
    for m in re.finditer(r"\.([A-Za-z0-9_\-$]+)|\['([^']*)'\]|\[(\d+)\]", field_path):
        if m.group(1) is not None:
            parts.append(m.group(1))
        elif m.group(2) is not None:
            parts.append(m.group(2))
        else:
            parts.append(int(m.group(3)))
    return parts


def _eval_message(error: BaseException) -> str:
    text = str(error.args[0]) if error.args else str(error)
    m = re.search(r"no such member in mapping: '([^']*)'", text)
    if m:
        return f"no such key: {m.group(1)}"
    return " ".join(text.split())
