"""The OpenAPI v3 structural schema of both training-job kinds: the shape of the API.

One schema serves three readers: the CRDs (`trainops crds` embeds it as `openAPIV3Schema`), the
strict decoder in `policies.structural` (unknown fields and wrong types, on every admission) and
the CEL rules in `policies.cel` (which attach `x-kubernetes-validations` to its nodes).

Our own fields are written out here — they are the T9k job API described in the seeds; the
per-kind facts (replica types, main container, defaults) and the enums and ranges come from the
rule modules (`policies.tensorflow`, `policies.xgboost`, `policies.rules_common`), so the CRD
and the webhook cannot drift apart. The
replica `template` is the real PodTemplateSpec schema derived from Kubernetes' published
definitions (`policies.schemas`), never hand-typed.

Structural rules followed (apiextensions.k8s.io/v1): every node has a `type` except
`x-kubernetes-int-or-string` nodes; no `$ref`; no `additionalProperties` next to `properties`;
the root `metadata` is only `type: object`; keys of `x-kubernetes-list-type: map` lists are
required. Value constraints a server checks cheaply (`enum`, `minimum`, `maxItems`,
`maxLength`) sit in the schema; rules across fields are CEL in `policies.cel`. Lists the CEL
rules iterate are bounded (`maxItems`) and so are the strings they compare (`maxLength`), so a
real API server's static CEL cost estimate stays within its budget.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from policies.kinds import KindSpec
from policies.rules_common import CLEAN_UP_POLICIES, PRIORITY_RANGE, RESTART_POLICIES
from policies.schemas import pod_template_spec
from policies.tensorflow import TENSORFLOW
from policies.xgboost import XGBOOST

__all__ = [
    "KIND_REPLICA_TYPES",
    "MAIN_CONTAINERS",
    "MAX_COMMAND_ITEMS",
    "MAX_CONTAINERS",
    "MAX_TYPE_LENGTH",
    "openapi_schema",
]

Schema = dict[str, Any]

_KINDS: dict[str, KindSpec] = {k.kind: k for k in (TENSORFLOW, XGBOOST)}
KIND_REPLICA_TYPES = {name: k.replica_types for name, k in _KINDS.items()}
MAIN_CONTAINERS = {name: k.main_container for name, k in _KINDS.items()}
MAX_ATTEMPTS = 10
"""The ended runs a replica's status lists (controller/attempts.py)."""
REPLICA_PHASES = ("Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted")
JOB_PHASES = ("Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown")
MAX_TYPE_LENGTH = 32
"""Replica type names are short words; the bound keeps CEL string comparisons cheap."""
MAX_CONTAINERS = 64
"""Bound on a replica pod's containers, for the main-container rule's cost (see `_replica_spec`)."""
MAX_COMMAND_ITEMS = 256
"""Bound on debug/resume command and args lists (compared by the resumeSpecs transition rule)."""
MAX_ARG_LENGTH = 4096
"""Bound on each debug/resume command or argument string (same reason)."""
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
FILESET_PATTERN = (
    r"^t9k://pvc/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"(/([^./][^/]*|\.|\.[^./][^/]*|\.\.[^/]+)?)*$"
)
"""t9k://pvc/<pvc-name>[/<path>]: a DNS-1123 PVC name and a path without `..` segments."""


def openapi_schema(kind: str) -> Schema:
    """The structural `openAPIV3Schema` of `kind`, without CEL rules (a fresh copy)."""
    return copy.deepcopy(_schema(kind))


@cache
def _schema(kind: str) -> Schema:
    if kind not in KIND_REPLICA_TYPES:
        raise ValueError(f"unknown training-job kind {kind!r}")
    return _obj(
        f"{kind} is a T9k distributed training job (batch.tensorstack.dev/v1beta1).",
        required=("spec",),
        apiVersion=_str("APIVersion of the object: batch.tensorstack.dev/v1beta1."),
        kind=_str(f"Kind of the object: {kind}."),
        metadata={"type": "object"},
        spec=_spec(kind),
        status=_status(),
    )


# --- spec -------------------------------------------------------------------------------------


def _spec(kind: str) -> Schema:
    types = KIND_REPLICA_TYPES[kind]
    return _obj(
        "The desired job: its replicas and how it runs.",
        required=("replicaSpecs",),
        replicaSpecs=_list(
            "One entry per replica type; each type at most once.",
            _replica_spec(kind, types),
            min_items=1,
            max_items=len(types),
            map_keys=("type",),
        ),
        runPolicy=_obj(
            "What happens when replicas fail and when the job ends.",
            cleanUpPolicy=_enum(
                "Which replicas to delete when the job ends: None, All or Unfinished.",
                CLEAN_UP_POLICIES,
                default=_KINDS[kind].default_clean_up_policy,
            ),
            backoffLimit=_int(
                "How many replica restarts, across all replicas, before the job fails.",
                minimum=0,
            ),
            activeDeadlineSeconds=_int(
                "Seconds the job may run before it is failed.", minimum=1, fmt="int64"
            ),
        ),
        runMode=_obj(
            "Debug and pause modes.",
            debug=_obj(
                "Debug mode: replicas are created but run a waiting command, not the training.",
                enabled=_bool("Whether debug mode is on."),
                replicaSpecs=_list(
                    "Per replica type debug settings (default: all types, `sleep inf`).",
                    _mode_spec(
                        types,
                        "How one replica type waits in debug mode.",
                        command="The command replicas run while waiting (default `sleep inf`).",
                    ),
                    max_items=len(types),
                    map_keys=("type",),
                ),
            ),
            pause=_obj(
                "Pause mode: replicas are deleted (or not created) until it is turned off.",
                enabled=_bool("Whether the job is paused; may be toggled at any time."),
                resumeSpecs=_list(
                    "How replica types resume after a pause; immutable once set.",
                    _mode_spec(
                        types,
                        "How one replica type resumes.",
                        command="The command on resume (default: the template's).",
                        args="The arguments on resume (default: the template's).",
                    ),
                    max_items=len(types),
                    map_keys=("type",),
                ),
            ),
        ),
        scheduler=_obj(
            "Which scheduler places the replicas (absent: the Kubernetes default scheduler).",
            t9kScheduler=_obj(
                "Schedule with the T9k Scheduler.",
                required=("queue",),
                queue={
                    **_str("The queue the replicas wait in.", max_length=253),
                    "minLength": 1,
                    "pattern": DNS1123_SUBDOMAIN,
                },
                priority={
                    **_int("The priority within the queue.", minimum=PRIORITY_RANGE[0]),
                    "maximum": PRIORITY_RANGE[1],
                },
            ),
        ),
        tensorboardSpec=_obj(
            "A TensorBoard that visualises the training logs.",
            required=("image", "trainingLogFilesets"),
            image={**_str("The TensorBoard image."), "minLength": 1},
            trainingLogFilesets=_list(
                "Log locations, as t9k://pvc/<pvc-name>/<path> URIs.",
                {**_str("A t9k://pvc/<pvc-name>/<path> URI."), "pattern": FILESET_PATTERN},
                min_items=1,
            ),
            resources=_tensorboard_resources(),
        ),
    )


def _tensorboard_resources() -> Schema:
    """The TensorBoard container's requests and limits: a container's `resources` schema
    (from the pod template) without `claims`, which only pod-level resource claims can fill."""
    containers = pod_template_spec()["properties"]["spec"]["properties"]["containers"]
    node = copy.deepcopy(containers["items"]["properties"]["resources"])
    node["properties"].pop("claims", None)
    node["description"] = "The TensorBoard container's compute resources (requests, limits)."
    resources: Schema = node
    return resources


def _replica_spec(kind: str, types: tuple[str, ...]) -> Schema:
    template = copy.deepcopy(pod_template_spec())
    template["description"] = (
        "The pod template of every replica of this type (a Kubernetes PodTemplateSpec); "
        "its restartPolicy is overridden by the replica spec's."
    )
    # The one tightening of the Kubernetes pod schema: the main-container CEL rule iterates
    # `containers`, and an unbounded list makes a server's cost estimate exceed its budget.
    template["properties"]["spec"]["properties"]["containers"]["maxItems"] = MAX_CONTAINERS
    return _obj(
        "A set of identical replicas of one type.",
        required=("type",),
        type=_replica_type(types, "The replica type."),
        replicas={**_int("How many replicas of this type.", minimum=0), "default": 1},
        restartPolicy=_enum(
            "When replicas restart: Never, OnFailure, Always or ExitCode "
            "(on exit codes 130, 137, 138 and 143).",
            RESTART_POLICIES,
            default=_KINDS[kind].default_restart_policy,
        ),
        template=template,
    )


def _mode_spec(types: tuple[str, ...], description: str, **lists: str) -> Schema:
    commands = {
        name: _list(text, _str(max_length=MAX_ARG_LENGTH), max_items=MAX_COMMAND_ITEMS, atomic=True)
        for name, text in lists.items()
    }
    return _obj(
        description,
        required=("type",),
        type=_replica_type(types, "The replica type these settings apply to."),
        skipInitContainer=_bool("Whether to skip the init containers (default false)."),
        **commands,
    )


def _replica_type(types: tuple[str, ...], description: str) -> Schema:
    return _enum(
        description + " One of " + ", ".join(types) + " (lower case once defaulted).",
        types,
        max_length=MAX_TYPE_LENGTH,
    )


# --- status -----------------------------------------------------------------------------------


def _status() -> Schema:
    # `conditions` and `tasks` are atomic lists (as training-operator's CRDs have them): one
    # writer, the controller, replaces the whole status, so per-item ownership buys nothing,
    # while kube-apiserver would keep a field set of every condition's and every task's fields
    # in managedFields and walk it on every status write (a quarter to a third of the server's
    # time per status write, docs/PERFORMANCE.md).
    return _obj(
        "The observed state of the job, written by the controller.",
        phase=_enum("The job's phase.", JOB_PHASES),
        conditions=_list(
            "The job's conditions: Initialized, Running, ReplicaFailure, Completed, Failed, "
            "Paused.",
            _obj(
                "One condition of the job.",
                required=("type", "status"),
                type=_str("The condition type."),
                status=_str('"True", "False" or "Unknown".'),
                reason=_str("A one-word reason for the last transition."),
                message=_str("A human-readable message about the last transition."),
                lastTransitionTime=_time("When the condition last changed status."),
                lastUpdateTime=_time("When the condition was last updated."),
            ),
            atomic=True,
        ),
        tasks=_list(
            "The replicas of each type and their pods.",
            _obj(
                "The replicas of one type.",
                required=("type",),
                type=_str("The replica type."),
                restartCount=_int("Restarts of all replicas of this type.", fmt="int32"),
                replicas=_list(
                    "One entry per replica.",
                    _obj(
                        "One replica and its pod.",
                        name=_str("The pod name."),
                        uid=_str("The pod UID."),
                        phase=_enum("The replica's phase.", REPLICA_PHASES),
                        restartCount=_int(
                            "Restarts of this replica; its pods carry the count they were "
                            "created with (annotation batch.tensorstack.dev/restart-count).",
                            fmt="int32",
                        ),
                        containers=_list(
                            "The pod's containers.",
                            _obj(
                                "One container of the pod.",
                                name=_str("The container name."),
                                state=_str("Waiting, Running or Terminated."),
                                exitCode=_int(
                                    "The exit code once terminated, or of its last run while "
                                    "it waits to be restarted.",
                                    fmt="int32",
                                ),
                            ),
                        ),
                        attempts=_list(
                            "The replica's ended runs, oldest first (the newest "
                            f"{MAX_ATTEMPTS}); attempt n ran after n restarts.",
                            _obj(
                                "One ended run of the main container.",
                                attempt=_int(
                                    "The replica's restart count when it ran.", fmt="int32"
                                ),
                                exitCode=_int("Its exit code.", fmt="int32"),
                                reason=_str("Why it ended (Error, Completed, OOMKilled, ...)."),
                                startedAt=_time("When it started."),
                                finishedAt=_time("When it ended."),
                                podUID=_str("The pod that ran it."),
                                keptLog=_obj(
                                    "The tail of its log, kept by the controller.",
                                    configMap=_str("The job's ConfigMap holding it."),
                                    key=_str("Its key in that ConfigMap."),
                                ),
                            ),
                            max_items=MAX_ATTEMPTS,
                        ),
                        stopped=_str(
                            "Why the controller stopped the replica's pod, which the kubelet "
                            "would have restarted in place: BackoffLimitExceeded (never "
                            "recreated) or JobEnded."
                        ),
                    ),
                ),
            ),
            atomic=True,
        ),
        aggregate={
            "description": "How many replicas are in each phase.",
            "type": "object",
            "properties": {
                p.lower(): _int(f"Replicas in phase {p}.", fmt="int32") for p in REPLICA_PHASES
            },
        },
        readyReplicas=_str('Ready replicas out of all, as "<ready>/<total>" (a printer column).'),
        backoffCount=_int("Replica restarts so far, counted against backoffLimit.", fmt="int32"),
        observedGeneration=_int("The spec generation this status describes.", fmt="int64"),
        startTime=_time("When the controller first acted on the job."),
        completionTime=_time("When the job finished."),
        progress=_obj(
            "Training progress as the job's processes report it (docs/PROGRESS.md), written by "
            "the controller at most every few seconds.",
            percent=_int("Percent done: step / totalSteps, else epoch / totalEpochs."),
            step=_int("The furthest step a replica reported.", fmt="int64"),
            totalSteps=_int("The steps of the whole run, as reported.", fmt="int64"),
            epoch=_int("The furthest epoch a replica reported.", fmt="int64"),
            totalEpochs=_int("The epochs of the whole run, as reported.", fmt="int64"),
            stepsPerSecond={
                "description": "The step rate over the last five minutes of reports.",
                "type": "number",
            },
            eta=_str("Time left at that rate when written, e.g. 3m20s.", max_length=32),
            etaTime=_time("When the run is expected to end at that rate."),
            metrics={
                "description": "The latest metrics of metricsFrom (loss, accuracy, …; 16 at most).",
                "type": "object",
                "additionalProperties": {"type": "number"},
            },
            metricsFrom=_str("The replica the metrics are from, e.g. worker-0.", max_length=64),
            updatedAt=_time("When the latest report arrived."),
        ),
        tensorboard=_obj(
            "The state of the job's TensorBoard.",
            action=_str("The controller's last action on it."),
            dependent=_obj(
                "The TensorBoard object.",
                apiVersion=_str(),
                kind=_str(),
                name=_str(),
                namespace=_str(),
                uid=_str(),
            ),
            note=_str("A human-readable note."),
            ready=_bool("Whether the TensorBoard is ready."),
            reason=_str("A one-word reason."),
            type=_str("Normal or Warning."),
        ),
    )


# --- node constructors ------------------------------------------------------------------------


def _obj(description: str, *, required: tuple[str, ...] = (), **props: Schema) -> Schema:
    node: Schema = {"description": description, "type": "object", "properties": props}
    if required:
        node["required"] = list(required)
    return node


def _list(
    description: str,
    items: Schema,
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    map_keys: tuple[str, ...] = (),
    atomic: bool = False,
) -> Schema:
    node: Schema = {"description": description, "type": "array", "items": items}
    if min_items is not None:
        node["minItems"] = min_items
    if max_items is not None:
        node["maxItems"] = max_items
    if map_keys:
        node["x-kubernetes-list-type"] = "map"
        node["x-kubernetes-list-map-keys"] = list(map_keys)
    elif atomic:
        node["x-kubernetes-list-type"] = "atomic"
    return node


def _str(description: str = "", *, max_length: int | None = None) -> Schema:
    node: Schema = {"type": "string"}
    if description:
        node = {"description": description, **node}
    if max_length is not None:
        node["maxLength"] = max_length
    return node


def _enum(
    description: str,
    values: tuple[str, ...],
    *,
    max_length: int | None = None,
    default: str | None = None,
) -> Schema:
    node = {**_str(description, max_length=max_length), "enum": list(values)}
    if default is not None:
        node["default"] = default
    return node


INT32_MAX = 2**31 - 1


def _int(description: str, *, minimum: int | None = None, fmt: str = "int32") -> Schema:
    node: Schema = {"description": description, "type": "integer", "format": fmt}
    if minimum is not None:
        node["minimum"] = minimum
    if fmt == "int32":
        # kube-apiserver does not enforce `format: int32` on custom resources: without a
        # maximum, `replicas: 2147483648` would be stored and the controller would act on it.
        node["maximum"] = INT32_MAX
    return node


def _bool(description: str) -> Schema:
    return {"description": description, "type": "boolean"}


def _time(description: str) -> Schema:
    return {"description": description, "type": "string", "format": "date-time"}
