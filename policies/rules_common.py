"""The rules both training-job kinds share, one small function per part of the spec.

Each `validate_<part>` reads one part of a *defaulted* job and returns `FieldError`s; none
raises. A part of the wrong JSON type is skipped, not reported: the structural check
(`policies.structural`) owns type errors and unknown fields, so a value is never reported twice.
The kind-specific facts (replica types, main container, master rule) come in a `KindSpec`.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from policies.fieldpath import (
    ErrorType,
    FieldError,
    Path,
    duplicate,
    invalid,
    json_type,
    not_supported,
    required,
)
from policies.kinds import KindSpec, Replica
from policies.resources import container_resources, container_resources_ok, validate_resources

__all__ = [
    "CLEAN_UP_POLICIES",
    "MAX_NAME_LENGTH",
    "PRIORITY_RANGE",
    "RESTART_POLICIES",
    "TENSORBOARD_SUFFIX",
    "job_types",
    "validate_name",
    "validate_replica_specs",
    "validate_run_mode",
    "validate_run_policy",
    "validate_scheduler",
    "validate_tensorboard",
]

RESTART_POLICIES = ("Never", "OnFailure", "Always", "ExitCode")
CLEAN_UP_POLICIES = ("None", "All", "Unfinished")
PRIORITY_RANGE = (0, 100)
# Pods and headless Services are named <job>-<type>-<index>; a Service name is a DNS-1035 label.
MAX_NAME_LENGTH = 63
# The job's TensorBoard Deployment and Service are named <job>-tensorboard.
TENSORBOARD_SUFFIX = "-tensorboard"
# The API server appends 5 random characters to metadata.generateName (truncated to 58).
_GENERATED_SUFFIX = 5

_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_PREFIX = re.compile(r"[a-z][-a-z0-9]*")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_FILESET = re.compile(r"t9k://pvc/(?P<pvc>[^/]*)(?:/(?P<path>.*))?", re.DOTALL)

_DNS1035_HELP = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_HELP = (
    "a DNS-1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)

_CONTAINER_LISTS = ("initContainers", "containers")
_SPEC = Path.of("spec")
_REPLICA_SPECS = _SPEC.child("replicaSpecs")
_RUN_POLICY = _SPEC.child("runPolicy")
_NAME = Path.of("metadata", "name")


def job_types(kind: KindSpec, replicas: list[Replica]) -> list[str]:
    """The supported replica types the job declares, in order, each once."""
    seen: list[str] = []
    for r in replicas:
        if r.type in kind.replica_types and r.type not in seen:
            seen.append(r.type)
    return seen


def validate_name(
    kind: KindSpec, metadata: Any, replicas: list[Replica], *, tensorboard: bool = False
) -> list[FieldError]:
    """`metadata.name` is a DNS-1035 label leaving room for `-<type>-<largest index>`, and for
    `-tensorboard` when the job has a TensorBoard (its Deployment and Service are so named).

    The structural check leaves the root `metadata` to ObjectMeta validation, so the few
    ObjectMeta facts a job relies on (an object, a string name) are checked here.
    """
    if metadata is None:
        return [required(Path.of("metadata", "name"))]
    if not isinstance(metadata, dict):
        return [invalid(Path.of("metadata"), json_type(metadata), "must be of type object")]
    name, generate = metadata.get("name"), metadata.get("generateName")
    suffix, longest = _longest_suffix(kind, replicas)
    if tensorboard and len(TENSORBOARD_SUFFIX) > suffix:
        suffix, longest = len(TENSORBOARD_SUFFIX), "TensorBoard"
    if (name is None or name == "") and generate is not None and generate != "":
        return _validate_generate_name(generate, suffix, longest)
    if name is None or name == "":
        return [required(_NAME, "a job name (or metadata.generateName) is required")]
    if not isinstance(name, str):
        return [invalid(_NAME, json_type(name), "must be of type string")]
    if len(name) > MAX_NAME_LENGTH:
        return [_too_long(_NAME, name, MAX_NAME_LENGTH - suffix, longest)]
    if not _DNS1035_LABEL.fullmatch(name):
        return [invalid(_NAME, name, _DNS1035_HELP)]
    if len(name) + suffix > MAX_NAME_LENGTH:
        return [_too_long(_NAME, name, MAX_NAME_LENGTH - suffix, longest)]
    return []


def _validate_generate_name(generate: Any, suffix: int, longest: str) -> list[FieldError]:
    path = Path.of("metadata", "generateName")
    if not isinstance(generate, str):
        return [invalid(path, json_type(generate), "must be of type string")]
    if not _DNS1035_PREFIX.fullmatch(generate):
        return [invalid(path, generate, _DNS1035_HELP)]
    limit = MAX_NAME_LENGTH - suffix - _GENERATED_SUFFIX
    if len(generate) > limit:
        return [_too_long(path, generate, limit, longest, generated=True)]
    return []


def validate_replica_specs(
    kind: KindSpec, spec: dict[str, Any], replicas: list[Replica]
) -> list[FieldError]:
    """Types, counts, restart policies and pod templates of `spec.replicaSpecs`, read through
    `replicas` (`kinds.replicas_of`: its object entries, their types and counts typed).

    Runs for every replica spec of every admitted job, so paths are built only for errors.
    """
    items = spec.get("replicaSpecs")
    if items is None or items == []:
        return [required(_REPLICA_SPECS, "at least one replica spec is required")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    types = kind.replica_types
    for i, rtype, count, item in replicas:
        if rtype is not None:
            if rtype not in types:
                errors.append(not_supported(_at(i, "type"), rtype, types))
            elif rtype in seen:
                errors.append(duplicate(_at(i, "type"), rtype))
            seen.add(rtype)
        elif item.get("type") is None:  # (a type of another JSON type is the schema's)
            errors.append(required(_at(i, "type"), _one_of(types)))
        if count is not None and count < 0:
            errors.append(invalid(_at(i, "replicas"), count, "must be greater than or equal to 0"))
        policy = item.get("restartPolicy")
        if isinstance(policy, str) and policy not in RESTART_POLICIES:
            errors.append(not_supported(_at(i, "restartPolicy"), policy, RESTART_POLICIES))
        errors.extend(_validate_template(kind, item, i))
    return errors


def validate_run_policy(spec: dict[str, Any]) -> list[FieldError]:
    """`cleanUpPolicy` in its enum, `backoffLimit` >= 0, `activeDeadlineSeconds` >= 1."""
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        return []
    errors: list[FieldError] = []
    policy = run_policy.get("cleanUpPolicy")
    if isinstance(policy, str) and policy not in CLEAN_UP_POLICIES:
        errors.append(not_supported(_RUN_POLICY.child("cleanUpPolicy"), policy, CLEAN_UP_POLICIES))
    backoff = run_policy.get("backoffLimit")
    if _is_int(backoff) and backoff < 0:
        errors.append(
            invalid(
                _RUN_POLICY.child("backoffLimit"), backoff, "must be greater than or equal to 0"
            )
        )
    deadline = run_policy.get("activeDeadlineSeconds")
    if _is_int(deadline) and deadline < 1:
        errors.append(
            invalid(
                _RUN_POLICY.child("activeDeadlineSeconds"),
                deadline,
                "must be greater than or equal to 1",
            )
        )
    return errors


def validate_scheduler(spec: dict[str, Any]) -> list[FieldError]:
    """`t9kScheduler.queue` names a queue; `priority` lies in `PRIORITY_RANGE`."""
    scheduler = spec.get("scheduler")
    t9k = scheduler.get("t9kScheduler") if isinstance(scheduler, dict) else None
    if not isinstance(t9k, dict):
        return []
    path = _SPEC.child("scheduler", "t9kScheduler")
    errors: list[FieldError] = []
    queue = t9k.get("queue")
    if queue is None or queue == "":
        errors.append(required(path.child("queue"), "the T9k Scheduler queue to submit to"))
    elif isinstance(queue, str) and not _is_subdomain(queue):
        errors.append(invalid(path.child("queue"), queue, _DNS1123_SUBDOMAIN_HELP))
    priority = t9k.get("priority")
    low, high = PRIORITY_RANGE
    if _is_int(priority) and not low <= priority <= high:
        errors.append(
            invalid(
                path.child("priority"), priority, f"must be between {low} and {high}, inclusive"
            )
        )
    return errors


def validate_tensorboard(spec: dict[str, Any]) -> list[FieldError]:
    """An image, at least one `t9k://pvc/<pvc-name>/<path>` fileset, sound resources."""
    board = spec.get("tensorboardSpec")
    if not isinstance(board, dict):
        return []
    path = _SPEC.child("tensorboardSpec")
    errors: list[FieldError] = []
    image = board.get("image")
    if image is None or image == "":
        errors.append(required(path.child("image"), "the TensorBoard image to run"))
    filesets = board.get("trainingLogFilesets")
    fpath = path.child("trainingLogFilesets")
    if filesets is None or filesets == []:
        errors.append(required(fpath, "at least one t9k://pvc/<pvc-name>/<path> URI"))
    elif isinstance(filesets, list):
        for i, uri in enumerate(filesets):
            if isinstance(uri, str):
                detail = _fileset_problem(uri)
                if detail:
                    errors.append(invalid(fpath.index(i), uri, detail))
    errors.extend(validate_resources(board.get("resources"), path.child("resources")))
    return errors


def validate_run_mode(spec: dict[str, Any], types: list[str]) -> list[FieldError]:
    """Debug and resume specs name replica types the job has, each at most once."""
    run_mode = spec.get("runMode")
    if not isinstance(run_mode, dict):
        return []
    errors: list[FieldError] = []
    for section, key in (("debug", "replicaSpecs"), ("pause", "resumeSpecs")):
        part = run_mode.get(section)
        items = part.get(key) if isinstance(part, dict) else None
        if not isinstance(items, list):
            continue
        path = _SPEC.child("runMode", section, key)
        seen: set[str] = set()
        for i, item in enumerate(items):
            rtype = item.get("type") if isinstance(item, dict) else None
            tpath = path.index(i).child("type")
            if isinstance(item, dict) and rtype is None:
                errors.append(required(tpath, _one_of(tuple(types))))
            elif isinstance(rtype, str):
                if rtype not in types:
                    errors.append(not_supported(tpath, rtype, types))
                elif rtype in seen:
                    errors.append(duplicate(tpath, rtype))
                seen.add(rtype)
    return errors


def _validate_template(kind: KindSpec, item: dict[str, Any], i: int) -> list[FieldError]:
    try:
        pod_spec = item["template"]["spec"]
        containers = pod_spec["containers"]
    except (KeyError, TypeError):  # a part missing, null or of another type: the report says
        return _template_errors(kind, item, i)
    if (
        type(containers) is list
        and containers
        and not pod_spec.get("initContainers")
        and _containers_ok(kind.main_container, containers)
    ):
        return []  # the usual pod: nothing to report, and no report built
    return _template_errors(kind, item, i)


def _template_errors(kind: KindSpec, item: dict[str, Any], i: int) -> list[FieldError]:
    """What is wrong with a replica spec's pod template (possibly nothing)."""
    template = item.get("template")
    if template is None:
        return [required(_at(i, "template"), "a pod template for the replicas is required")]
    if not isinstance(template, dict):
        return []
    pod_spec = template.get("spec")
    if pod_spec is None:
        detail = "a pod template with spec.containers is required"
        if "containers" in template:
            detail = "containers belong under template.spec, not directly under template"
        return [required(_at(i, "template", "spec"), detail)]
    if not isinstance(pod_spec, dict):
        return []
    containers = pod_spec.get("containers")
    if containers is None or containers == []:
        return [
            required(
                _at(i, "template", "spec", "containers"),
                f'at least one container, named "{kind.main_container}"',
            )
        ]
    if not isinstance(containers, list):
        return []
    return _container_errors(kind, pod_spec, containers, i)


def _containers_ok(main: str, containers: list[Any]) -> bool:
    """Whether `_container_errors` has nothing to report for a pod without init containers:
    every container a dict with a name of its own and sound resources, the first one named
    `main` with an image. (False when in doubt: `_container_errors` then decides.)"""
    seen: set[str] = set()
    has_main = False
    for container in containers:
        if not isinstance(container, dict):
            return False
        name = container.get("name")
        if type(name) is not str or not name or name in seen:
            return False
        seen.add(name)
        if name == main and not has_main:
            image = container.get("image")
            if image is None or image == "":
                return False
            has_main = True
        resources = container.get("resources")
        if isinstance(resources, dict) and resources and not container_resources_ok(resources):
            return False
    return has_main


def _container_errors(
    kind: KindSpec, pod_spec: dict[str, Any], containers: list[Any], i: int
) -> list[FieldError]:
    """Names, the main container and resources of a pod's containers and init containers."""
    # One pass over the containers; errors keep the order: names, then the main container,
    # then resources.
    names: list[FieldError] = []
    found: list[FieldError] = []
    problems: list[tuple[str, int]] = []
    seen: set[str] = set()
    main: int | None = None
    for list_name in _CONTAINER_LISTS:
        group = containers if list_name == "containers" else pod_spec.get(list_name)
        if not isinstance(group, list):
            continue
        for j, container in enumerate(group):
            if not isinstance(container, dict):
                continue
            name = container.get("name")
            if name is None or name == "":
                names.append(required(_at(i, "template", "spec", list_name).index(j).child("name")))
            elif isinstance(name, str):
                if name in seen:
                    path = _at(i, "template", "spec", list_name).index(j).child("name")
                    names.append(duplicate(path, name))
                seen.add(name)
            if main is None and list_name == "containers" and name == kind.main_container:
                main = j
                image = container.get("image")
                if image is None or image == "":
                    path = _at(i, "template", "spec", "containers").index(j).child("image")
                    found.append(required(path))
            resources = container.get("resources")
            if isinstance(resources, dict) and resources and not container_resources_ok(resources):
                problems.append((list_name, j))
    if main is None:
        found.append(
            required(
                _at(i, "template", "spec", "containers"),
                f'a container named "{kind.main_container}" runs the training',
            )
        )
    for list_name, j in problems:
        group = containers if list_name == "containers" else pod_spec["initContainers"]
        pod_path = _at(i, "template", "spec")
        found.extend(container_resources(group[j]["resources"], pod_path, list_name, j))
    return names + found


def _at(i: int, *names: str) -> Path:
    """`spec.replicaSpecs[i].<names...>`."""
    return _REPLICA_SPECS.index(i).child(*names)


def _longest_suffix(kind: KindSpec, replicas: list[Replica]) -> tuple[int, str]:
    """The length of the longest `-<type>-<index>` the job's pods get, and its replica type."""
    best, best_type = 0, ""
    types = kind.replica_types
    for _, rtype, count, _ in replicas:
        if count is not None and count > 0 and rtype in types:
            assert rtype is not None
            # "-<type>-<count - 1>"; indexes below 10 have one digit (the usual case)
            length = len(rtype) + (3 if count <= 10 else len(str(count - 1)) + 2)
            if length > best:
                best, best_type = length, rtype
    return best, best_type


def _too_long(
    path: Path, value: str, limit: int, rtype: str, *, generated: bool = False
) -> FieldError:
    if rtype:
        what = "generated job names" if generated else "the job name"
        child = (
            f"the suffix of its TensorBoard ({TENSORBOARD_SUFFIX})"
            if rtype == "TensorBoard"
            else f"the pod suffix for the last {rtype}"
        )
        detail = f"may not be more than {limit} characters: {what} plus {child} must fit in {MAX_NAME_LENGTH}"
    else:
        detail = f"may not be more than {limit} characters"
    return FieldError(ErrorType.TOO_LONG, path, detail, value)


def _fileset_problem(uri: str) -> str:
    match = _FILESET.fullmatch(uri)
    if match is None:
        return "must be a URI of the form t9k://pvc/<pvc-name>/<path>"
    if not _is_subdomain(match["pvc"]):
        return f"the PVC name in t9k://pvc/<pvc-name>/<path> is invalid: {_DNS1123_SUBDOMAIN_HELP}"
    if ".." in (match["path"] or "").split("/"):
        return "the path may not contain '..'"
    return ""


def _is_subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _one_of(types: tuple[str, ...]) -> str:
    return "must be one of " + ", ".join(f'"{t}"' for t in types) if types else ""
