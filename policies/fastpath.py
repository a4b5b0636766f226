"""Whether a job plainly passes every rule: the valid path of `/validate` in one walk.

Nearly every job the webhook sees is valid, and for those the rules of `job._rules` (six rule
functions and the warnings, each walking its part of the job) only confirm there is nothing to
say. `plainly_valid` asks that yes/no question in one walk over the replica specs, building no
report, and says yes only for the plain shape: a name, replica specs whose pods have no init
containers, a run policy, and under `spec` nothing else but a scheduler or a run mode with
neither mode enabled (checked by their own rule functions: they are cheap and rare). A
TensorBoard, any value of an unexpected type, anything in doubt answers False, and the full
rules decide as before.

Contract, property-tested on generated near-valid jobs (tests/policies/test_fast_paths.py):
`plainly_valid(kind, obj)` implies that the CREATE rules (`job._rules(kind, obj, None)`) find
no error and no warning. A new rule about something this walk accepts must be added here too
(or make the walk refuse that part), or the fast path would let its violations through.
"""

from __future__ import annotations

from typing import Any

from policies.advice import MANY_REPLICAS
from policies.kinds import KindSpec, Replica
from policies.resources import container_resources_ok
from policies.rules_common import (
    _DNS1035_LABEL,
    CLEAN_UP_POLICIES,
    MAX_NAME_LENGTH,
    RESTART_POLICIES,
    job_types,
    validate_run_mode,
    validate_scheduler,
)

__all__ = ["plainly_valid"]

_PLAIN_SPEC_KEYS = frozenset(("replicaSpecs", "runPolicy", "scheduler", "runMode"))
_RESTART_POLICIES = frozenset(RESTART_POLICIES)
_CLEAN_UP_POLICIES = frozenset(CLEAN_UP_POLICIES)
_new_tuple = tuple.__new__


def plainly_valid(kind: KindSpec, obj: dict[str, Any]) -> bool:
    """True only when the rules have nothing to report on `obj` (see the module's contract)."""
    metadata, spec = obj.get("metadata"), obj.get("spec")
    if type(metadata) is not dict or type(spec) is not dict:
        return False
    name = metadata.get("name")
    if type(name) is not str or not name:
        return False
    for key in spec:
        if key not in _PLAIN_SPEC_KEYS:
            return False
    items = spec.get("replicaSpecs")
    if type(items) is not list or not items:
        return False
    types, main = kind.replica_types, kind.main_container
    replicas: list[Replica] = []
    seen: set[str] = set()
    suffix = 0  # the longest "-<type>-<index>" of the job's pods
    has_ps = False
    for position, item in enumerate(items):
        if type(item) is not dict:
            return False
        rtype, count = item.get("type"), item.get("replicas")
        if type(rtype) is not str or rtype not in types or rtype in seen:
            return False
        seen.add(rtype)
        if count is not None:
            if type(count) is not int or count < 0 or count > MANY_REPLICAS:
                return False
            if count > 0:
                has_ps = has_ps or rtype == "ps"
                length = len(rtype) + (3 if count <= 10 else len(str(count - 1)) + 2)
                suffix = max(suffix, length)
        policy = item.get("restartPolicy")
        if policy is not None and (type(policy) is not str or policy not in _RESTART_POLICIES):
            return False
        if not _plain_pod(item.get("template"), main):
            return False
        replicas.append(_new_tuple(Replica, (position, rtype, count, item)))
    if len(name) + suffix > MAX_NAME_LENGTH or _DNS1035_LABEL.fullmatch(name) is None:
        return False
    if kind.validate_masters(replicas) or not _plain_run_policy(spec.get("runPolicy"), has_ps):
        return False
    if "scheduler" in spec and validate_scheduler(spec):
        return False
    return "runMode" not in spec or _plain_run_mode(spec, job_types(kind, replicas))


def _plain_pod(template: Any, main: str) -> bool:
    """A pod template whose containers have distinct names and sound resources, whose main
    container comes with an image and resource limits, with no init containers and no
    `restartPolicy` of its own (ignored, and warned about)."""
    if type(template) is not dict:
        return False
    pod_spec = template.get("spec")
    if type(pod_spec) is not dict or "initContainers" in pod_spec or "restartPolicy" in pod_spec:
        return False
    containers = pod_spec.get("containers")
    if type(containers) is not list:
        return False
    names: set[str] = set()
    has_main = False
    for container in containers:
        if type(container) is not dict:
            return False
        name = container.get("name")
        if type(name) is not str or not name or name in names:
            return False
        names.add(name)
        resources = container.get("resources")
        if name == main and not has_main:
            image = container.get("image")
            if image is None or image == "" or type(resources) is not dict:
                return False
            if not resources.get("limits"):  # (warned about: it may use a whole node)
                return False
            has_main = True
        if resources and (type(resources) is not dict or not container_resources_ok(resources)):
            return False
    return has_main


def _plain_run_policy(run_policy: Any, has_ps: bool) -> bool:
    """In range, and not `cleanUpPolicy: None` with parameter servers (warned about)."""
    if run_policy is None:
        return True
    if type(run_policy) is not dict:
        return False
    policy = run_policy.get("cleanUpPolicy")
    if policy is not None and (type(policy) is not str or policy not in _CLEAN_UP_POLICIES):
        return False
    if policy == "None" and has_ps:
        return False
    backoff = run_policy.get("backoffLimit")
    if backoff is not None and (type(backoff) is not int or backoff < 0):
        return False
    deadline = run_policy.get("activeDeadlineSeconds")
    return deadline is None or (type(deadline) is int and deadline >= 1)


def _plain_run_mode(spec: dict[str, Any], types: list[str]) -> bool:
    """A run mode the rules accept with neither debug nor pause enabled (each is warned about)."""
    run_mode = spec["runMode"]
    if type(run_mode) is not dict:
        return False
    for mode in ("debug", "pause"):
        part = run_mode.get(mode)
        if part is not None and (type(part) is not dict or part.get("enabled") is not False):
            return False
    return not validate_run_mode(spec, types)
