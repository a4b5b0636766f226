"""Defaulting: fill in what the user left out, never change what they wrote.

Why a separate step with a patch: the mutating webhook must answer with an RFC 6902 JSON Patch
from the submitted object to the defaulted one, `trainops check` shows that patch, and the
rules then judge the defaulted object (what would actually be stored).

How the patch is made: every default is one `add`/`replace` of a key or one append to a list,
and no default reads what another writes, so one walk records one operation (an RFC 6901
pointer and the new value) per default. `plan_defaults` is that walk: it only records, reading
the object *without changing it*; `default_with` walks a deep copy, noting where each
operation applies, and then applies them there (the same as applying the finished patch, since
no default reads another's).
The mutating webhook needs only the patch, so it calls `plan_defaults` and skips the deep copy
(the copy was most of the cost of defaulting). Pointers are built from our own field names and
list indexes, none of which contains `~` or `/`, so no escaping is needed. Diffing the two
documents with `jsonpatch.make_patch` gives an equivalent patch but costs ~1.3 ms per four-type
job (its list differ dominates), six times the whole admission budget; the tests apply the
recorded patch with `jsonpatch` and compare the result with the defaulted object, and check it
against `make_patch`'s, so the two cannot drift.

Defaults (sources in docs/POLICIES.md):

- `spec.replicaSpecs[*].type`, `spec.runMode.debug.replicaSpecs[*].type` and
  `spec.runMode.pause.resumeSpecs[*].type`: lower-cased (any case is accepted on input);
- `spec.replicaSpecs[*].replicas`: 1;
- `spec.replicaSpecs[*].restartPolicy`: per kind (`KindSpec.default_restart_policy`);
- `spec.runPolicy.cleanUpPolicy`: per kind (`KindSpec.default_clean_up_policy`);
- the main container's named port (`tfjob-port: 2222`, `xgboostjob-port: 9999`) when absent.

A JSON `null` counts as absent, as the API server prunes nulls of non-nullable fields before
defaulting. Anything of the wrong type is left untouched for the rules to report: defaulting
never raises and never guesses.
"""

from __future__ import annotations

from typing import Any

from policies.kinds import KindSpec

__all__ = ["copy_json", "default_with", "plan_defaults"]

Op = dict[str, Any]


def default_with(kind: KindSpec | None, obj: Any) -> tuple[Any, list[Op]]:
    """A defaulted copy of `obj` and the JSON Patch to it; `kind=None` defaults nothing."""
    defaulted = copy_json(obj)
    if kind is None or not isinstance(defaulted, dict):
        return defaulted, []
    where: list[_Where] = []
    ops = _defaults(kind, defaulted, where)
    # The same as applying the finished patch: no default reads what another one writes.
    for (container, key), op in zip(where, ops, strict=True):
        if key is None:
            container.append(copy_json(op["value"]))  # the patch and the object share nothing
        else:
            container[key] = copy_json(op["value"])
    return defaulted, ops


def plan_defaults(kind: KindSpec, obj: dict[str, Any]) -> list[Op]:
    """The JSON Patch that defaults `obj`, one operation per default; `obj` is not changed."""
    return _defaults(kind, obj, None)


_Where = tuple[Any, "str | None"]
"""Where an operation applies: the dict and key it sets, or the list it appends to (`None`)."""


def _defaults(kind: KindSpec, obj: dict[str, Any], where: list[_Where] | None) -> list[Op]:
    """The walk: one operation per default, and with `where`, where each applies."""
    ops: list[Op] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ops
    replica_specs = spec.get("replicaSpecs")
    if isinstance(replica_specs, list):
        for i, item in enumerate(replica_specs):
            if isinstance(item, dict):
                _default_replica(kind, item, i, ops, where)
    run_policy = spec.get("runPolicy")
    policy = kind.default_clean_up_policy
    if run_policy is None:
        _set(spec, "runPolicy", {"cleanUpPolicy": policy}, "/spec", ops, where)
    elif isinstance(run_policy, dict) and run_policy.get("cleanUpPolicy") is None:
        _set(run_policy, "cleanUpPolicy", policy, "/spec/runPolicy", ops, where)
    run_mode = spec.get("runMode")
    if isinstance(run_mode, dict):
        for section, key in (("debug", "replicaSpecs"), ("pause", "resumeSpecs")):
            part = run_mode.get(section)
            if isinstance(part, dict) and isinstance(part.get(key), list):
                for i, item in enumerate(part[key]):
                    if isinstance(item, dict):
                        at = f"/spec/runMode/{section}/{key}/{i}"
                        _lower_type(item, at, ops, where)
    return ops


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data that shares nothing, faster than `copy.deepcopy`.

    Unlike `copy.deepcopy` (or a pickle round trip) it does not preserve shared sub-objects:
    YAML aliases load as one dict referenced twice, and defaulting one occurrence in place must
    not silently default the other. Nesting deeper than the interpreter's recursion limit is
    copied iteratively rather than failing.
    """
    try:
        return _copy_recursive(value, 0)
    except RecursionError:
        return _copy_iterative(value)


_RECURSIVE_COPY_DEPTH = 200
"""Nesting copied by recursion; deeper goes iteratively. Counted here, not left to the
interpreter's recursion limit: compiled (setup.py), this module has none, and 100,000 levels
overflowed the C stack."""


def _copy_recursive(value: Any, depth: int) -> Any:
    if isinstance(value, dict):
        if depth == _RECURSIVE_COPY_DEPTH:
            raise RecursionError
        return {k: _copy_recursive(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth == _RECURSIVE_COPY_DEPTH:
            raise RecursionError
        return [_copy_recursive(v, depth + 1) for v in value]
    return value


def _copy_iterative(value: Any) -> Any:
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        src, parent, key = stack.pop()
        if isinstance(src, dict):
            new: Any = dict.fromkeys(src)  # keeps the key order
            stack.extend((v, new, k) for k, v in src.items())
        elif isinstance(src, list):
            new = [None] * len(src)
            stack.extend((v, new, i) for i, v in enumerate(src))
        else:
            new = src
        parent[key] = new
    return root[0]


def _set(
    container: dict[str, Any],
    key: str,
    value: Any,
    at: str,
    ops: list[Op],
    where: list[_Where] | None,
) -> None:
    """Record `container[key] = value` as `add` (new key) or `replace` (e.g. of a null)."""
    ops.append(
        {"op": "replace" if key in container else "add", "path": f"{at}/{key}", "value": value}
    )
    if where is not None:
        where.append((container, key))


def _default_replica(
    kind: KindSpec, item: dict[str, Any], i: int, ops: list[Op], where: list[_Where] | None
) -> None:
    """Type lower-cased, `replicas`, `restartPolicy`, and the main container's port.

    Written out in one function, each path built only when its operation is recorded: this
    runs for every replica spec of every job the mutating webhook sees (and for both objects of
    every UPDATE the validating webhook sees, which are usually defaulted already)."""
    rtype = item.get("type")
    if isinstance(rtype, str) and rtype != rtype.lower():
        _set(item, "type", rtype.lower(), f"/spec/replicaSpecs/{i}", ops, where)
    if item.get("replicas") is None:
        _set(item, "replicas", 1, f"/spec/replicaSpecs/{i}", ops, where)
    if item.get("restartPolicy") is None:
        policy = kind.default_restart_policy
        _set(item, "restartPolicy", policy, f"/spec/replicaSpecs/{i}", ops, where)
    try:
        containers = item["template"]["spec"]["containers"]
    except (KeyError, TypeError):  # absent, null or not an object: nothing to default
        return
    if not isinstance(containers, list):
        return
    main = kind.main_container
    for j, container in enumerate(containers):
        if isinstance(container, dict) and container.get("name") == main:
            _default_port(kind, container, i, j, ops, where)
            return


def _default_port(
    kind: KindSpec,
    container: dict[str, Any],
    i: int,
    j: int,
    ops: list[Op],
    where: list[_Where] | None,
) -> None:
    """The framework's named port, with the `protocol` the API server's schema would default:
    an object stored while the webhook was away gets its port from the webhook on its next
    UPDATE, and the UPDATE rules compare it with the stored one defaulted here, so both must
    come out identical."""
    ports = container.get("ports")
    if ports is None:
        at = f"/spec/replicaSpecs/{i}/template/spec/containers/{j}"
        port = {"name": kind.port_name, "containerPort": kind.default_port, "protocol": "TCP"}
        _set(container, "ports", [port], at, ops, where)
    elif isinstance(ports, list):
        name = kind.port_name
        for p in ports:
            if isinstance(p, dict) and p.get("name") == name:
                return  # the user's port of that name keeps its number
        path = f"/spec/replicaSpecs/{i}/template/spec/containers/{j}/ports/-"
        port = {"name": name, "containerPort": kind.default_port, "protocol": "TCP"}
        ops.append({"op": "add", "path": path, "value": port})
        if where is not None:
            where.append((ports, None))


def _lower_type(item: dict[str, Any], at: str, ops: list[Op], where: list[_Where] | None) -> None:
    rtype = item.get("type")
    if isinstance(rtype, str) and rtype != rtype.lower():
        _set(item, "type", rtype.lower(), at, ops, where)
