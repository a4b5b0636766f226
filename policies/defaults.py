"""Defaulting: fill in what the user left out, never change what they wrote.

Why a separate step with a patch: the mutating webhook must answer with an RFC 6902 JSON Patch
from the submitted object to the defaulted one, `trainops check` shows that patch, and the
rules then judge the defaulted object (what would actually be stored).

How the patch is made: every default is one `add`/`replace` of a key or one append to a list,
and no default reads what another writes, so one walk records one operation (an RFC 6901
pointer and the new value) per default: `plan_defaults` only records, reading the object
*without changing it*; `default_with` walks a deep copy and applies each operation where it
records it. The mutating webhook needs only the patch, so it calls `plan_defaults` and skips
the deep copy (the copy was most of the cost of defaulting). Pointers are built from our own field names and list indexes, none of which
contains `~` or `/`, so no escaping is needed. Diffing the two documents with
`jsonpatch.make_patch` gives an equivalent patch but costs ~1.3 ms per four-type job (its list
differ dominates), six times the whole admission budget; the tests apply the recorded patch
with `jsonpatch` and compare the result with the defaulted object, and check it against
`make_patch`'s, so the two cannot drift.

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
    return defaulted, _defaults(kind, defaulted, _Ops(write=True))


def plan_defaults(kind: KindSpec, obj: dict[str, Any]) -> list[Op]:
    """The JSON Patch that defaults `obj`, one operation per default; `obj` is not changed."""
    return _defaults(kind, obj, _Ops(write=False))


class _Ops:
    """The operations recorded so far; with `write`, each is also applied where it was found.

    Applying in place while walking (to `default_with`'s private copy) is the same as applying
    the finished patch, because no default reads what another one writes.
    """

    __slots__ = ("items", "write")

    def __init__(self, *, write: bool) -> None:
        self.items: list[Op] = []
        self.write = write


def _defaults(kind: KindSpec, obj: dict[str, Any], ops: _Ops) -> list[Op]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ops.items
    replica_specs = spec.get("replicaSpecs")
    if isinstance(replica_specs, list):
        for i, item in enumerate(replica_specs):
            if isinstance(item, dict):
                _default_replica(kind, item, f"/spec/replicaSpecs/{i}", ops)
    _default_run_policy(kind, spec, ops)
    run_mode = spec.get("runMode")
    if isinstance(run_mode, dict):
        for section, key in (("debug", "replicaSpecs"), ("pause", "resumeSpecs")):
            part = run_mode.get(section)
            if isinstance(part, dict) and isinstance(part.get(key), list):
                for i, item in enumerate(part[key]):
                    if isinstance(item, dict):
                        _lower_type(item, f"/spec/runMode/{section}/{key}/{i}", ops)
    return ops.items


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data that shares nothing, faster than `copy.deepcopy`.

    Unlike `copy.deepcopy` (or a pickle round trip) it does not preserve shared sub-objects:
    YAML aliases load as one dict referenced twice, and defaulting one occurrence in place must
    not silently default the other. Nesting deeper than the interpreter's recursion limit is
    copied iteratively rather than failing.
    """
    try:
        return _copy_recursive(value)
    except RecursionError:
        return _copy_iterative(value)


def _copy_recursive(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_recursive(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_recursive(v) for v in value]
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


def _set(container: dict[str, Any], key: str, value: Any, at: str, ops: _Ops) -> None:
    """Record `container[key] = value` as `add` (new key) or `replace` (e.g. of a null)."""
    op = "replace" if key in container else "add"
    ops.items.append({"op": op, "path": f"{at}/{key}", "value": value})
    if ops.write:
        container[key] = copy_json(value)  # the patch and the object share nothing


def _default_replica(kind: KindSpec, item: dict[str, Any], at: str, ops: _Ops) -> None:
    _lower_type(item, at, ops)
    if item.get("replicas") is None:
        _set(item, "replicas", 1, at, ops)
    if item.get("restartPolicy") is None:
        _set(item, "restartPolicy", kind.default_restart_policy, at, ops)
    template = item.get("template")
    tspec = template.get("spec") if isinstance(template, dict) else None
    containers = tspec.get("containers") if isinstance(tspec, dict) else None
    if isinstance(containers, list):
        for j, container in enumerate(containers):
            if isinstance(container, dict) and container.get("name") == kind.main_container:
                _default_port(kind, container, f"{at}/template/spec/containers/{j}", ops)
                break


def _default_port(kind: KindSpec, container: dict[str, Any], at: str, ops: _Ops) -> None:
    """The framework's named port, with the `protocol` the API server's schema would default:
    an object stored while the webhook was away gets its port from the webhook on its next
    UPDATE, and the UPDATE rules compare it with the stored one defaulted here, so both must
    come out identical."""
    ports = container.get("ports")
    if ports is None:
        port = {"name": kind.port_name, "containerPort": kind.default_port, "protocol": "TCP"}
        _set(container, "ports", [port], at, ops)
    elif isinstance(ports, list) and not any(
        isinstance(p, dict) and p.get("name") == kind.port_name for p in ports
    ):
        port = {"name": kind.port_name, "containerPort": kind.default_port, "protocol": "TCP"}
        ops.items.append({"op": "add", "path": f"{at}/ports/-", "value": port})
        if ops.write:
            ports.append(dict(port))


def _default_run_policy(kind: KindSpec, spec: dict[str, Any], ops: _Ops) -> None:
    run_policy = spec.get("runPolicy")
    if run_policy is None:
        _set(spec, "runPolicy", {"cleanUpPolicy": kind.default_clean_up_policy}, "/spec", ops)
    elif isinstance(run_policy, dict) and run_policy.get("cleanUpPolicy") is None:
        _set(run_policy, "cleanUpPolicy", kind.default_clean_up_policy, "/spec/runPolicy", ops)


def _lower_type(item: dict[str, Any], at: str, ops: _Ops) -> None:
    rtype = item.get("type")
    if isinstance(rtype, str) and rtype != rtype.lower():
        _set(item, "type", rtype.lower(), at, ops)
