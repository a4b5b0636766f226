"""Every validation rule, on both sides: a valid job, then the same job broken in one place.

Each case is `builder -> expected {(reason, field)}`; an empty set means admitted. Jobs go
through `admit` (default, then validate), as the webhook and `trainops check` run them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

import policies
from tests.support.jobs import container, replica, tf_job, xgb_job

Job = dict[str, Any]
Case = tuple[Callable[[], Job], set[tuple[str, str]]]

RS = "spec.replicaSpecs"
C0 = f"{RS}[0].template.spec.containers[0]"


def verdict(obj: Any) -> set[tuple[str, str]]:
    return {(e.type.value, e.field) for e in policies.admit(obj).errors}


def run_table(cases: dict[str, Case]) -> Any:
    return pytest.mark.parametrize(("build", "expected"), list(cases.values()), ids=list(cases))


def with_spec(job: Job, **fields: Any) -> Job:
    job["spec"].update(fields)
    return job


def tf_main(**kw: Any) -> list[dict[str, Any]]:
    return [container("tensorflow", **kw)]


REPLICA_TYPES: dict[str, Case] = {
    "all four TensorFlow types are accepted": (
        lambda: tf_job(
            replica("chief"), replica("worker", 2), replica("ps", 2), replica("evaluator")
        ),
        set(),
    ),
    "types in any case are accepted (and lower-cased)": (
        lambda: tf_job(replica("Chief"), replica("WORKER", 2)),
        set(),
    ),
    "an unknown TensorFlow type is not supported": (
        lambda: tf_job(replica("chief"), replica("master")),
        {("NotSupported", f"{RS}[1].type")},
    ),
    "a type listed twice is a duplicate": (
        lambda: tf_job(replica("chief"), replica("worker"), replica("worker")),
        {("Duplicate", f"{RS}[2].type")},
    ),
    "a type listed twice in different cases is a duplicate": (
        lambda: tf_job(replica("worker"), replica("Worker")),
        {("Duplicate", f"{RS}[1].type")},
    ),
    "a replica spec without a type is required to have one": (
        lambda: tf_job(
            replica("chief"), {k: v for k, v in replica("worker").items() if k != "type"}
        ),
        {("Required", f"{RS}[1].type")},
    ),
    "both XGBoost types are accepted": (lambda: xgb_job(), set()),
    "a TensorFlow type in an XGBoost job is not supported": (
        lambda: xgb_job(replica("master", main="xgboost"), replica("chief", main="xgboost")),
        {("NotSupported", f"{RS}[1].type")},
    ),
}

MASTERS: dict[str, Case] = {
    "a chief alone is a master": (lambda: tf_job(replica("chief")), set()),
    "workers alone are fine: worker 0 is the master": (lambda: tf_job(replica("worker", 3)), set()),
    "a chief with two replicas is invalid": (
        lambda: tf_job(replica("chief", 2), replica("worker")),
        {("Invalid", f"{RS}[0].replicas")},
    ),
    "a chief with zero replicas is invalid": (
        lambda: tf_job(replica("chief", 0), replica("worker")),
        {("Invalid", f"{RS}[0].replicas")},
    ),
    "parameter servers alone have no master": (
        lambda: tf_job(replica("ps", 2)),
        {("Required", RS)},
    ),
    "zero workers and no chief have no master": (
        lambda: tf_job(replica("worker", 0), replica("ps")),
        {("Required", RS)},
    ),
    "one evaluator is fine": (lambda: tf_job(replica("worker"), replica("evaluator")), set()),
    "two evaluators are invalid": (
        lambda: tf_job(replica("worker"), replica("evaluator", 2)),
        {("Invalid", f"{RS}[1].replicas")},
    ),
    "an XGBoost master alone is fine": (
        lambda: xgb_job(replica("master", main="xgboost")),
        set(),
    ),
    "an XGBoost job without a master is denied": (
        lambda: xgb_job(replica("worker", 3, main="xgboost")),
        {("Required", RS)},
    ),
    "an XGBoost master with two replicas is invalid": (
        lambda: xgb_job(replica("master", 2, main="xgboost")),
        {("Invalid", f"{RS}[0].replicas")},
    ),
    "two XGBoost master specs are duplicates": (
        lambda: xgb_job(replica("master", main="xgboost"), replica("master", main="xgboost")),
        {("Duplicate", f"{RS}[1].type")},
    ),
    "a missing replica count defaults to one, which makes a valid chief": (
        lambda: tf_job(replica("chief", None)),
        set(),
    ),
}

TEMPLATES: dict[str, Case] = {
    "a replica spec without a template is denied": (
        lambda: tf_job({"type": "chief"}),
        {("Required", f"{RS}[0].template")},
    ),
    "containers directly under template are reported on the template": (
        lambda: tf_job({"type": "chief", "template": {"containers": tf_main()}}),
        {("Forbidden", f"{RS}[0].template"), ("Required", f"{RS}[0].template.spec")},
    ),
    "an empty container list is denied": (
        lambda: tf_job(replica("chief", containers=[])),
        {("Required", f"{RS}[0].template.spec.containers")},
    ),
    "a pod without the main container is denied": (
        lambda: tf_job(replica("chief", containers=[container("trainer")])),
        {("Required", f"{RS}[0].template.spec.containers")},
    ),
    "an XGBoost pod needs a container named xgboost": (
        lambda: xgb_job(replica("master", main="tensorflow")),
        {("Required", f"{RS}[0].template.spec.containers")},
    ),
    "a main container without an image is denied": (
        lambda: tf_job(replica("chief", containers=[{"name": "tensorflow"}])),
        {("Required", f"{C0}.image")},
    ),
    "a main container with an empty image is denied": (
        lambda: tf_job(replica("chief", containers=[container("tensorflow", image="")])),
        {("Required", f"{C0}.image")},
    ),
    "a sidecar next to the main container is fine": (
        lambda: tf_job(replica("chief", containers=[container("sidecar"), container()])),
        set(),
    ),
    "an init container named like a container is a duplicate": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(),
            )
            | {
                "template": {
                    "spec": {"initContainers": [container("tensorflow")], "containers": tf_main()}
                }
            }
        ),
        {("Duplicate", f"{RS}[0].template.spec.containers[0].name")},
    ),
}

RESOURCES: dict[str, Case] = {
    "limits equal to requests are fine": (
        lambda: tf_job(
            replica("chief", containers=tf_main(limits={"cpu": "1"}, requests={"cpu": "1"}))
        ),
        set(),
    ),
    "500m equals 0.5": (
        lambda: tf_job(
            replica("chief", containers=tf_main(limits={"cpu": "500m"}, requests={"cpu": "0.5"}))
        ),
        set(),
    ),
    "a cpu limit below the request is invalid": (
        lambda: tf_job(
            replica("chief", containers=tf_main(limits={"cpu": 1}, requests={"cpu": "2"}))
        ),
        {("Invalid", f"{C0}.resources.limits.cpu")},
    ),
    "953Mi is less than 1G": (
        lambda: tf_job(
            replica(
                "chief", containers=tf_main(limits={"memory": "953Mi"}, requests={"memory": "1G"})
            )
        ),
        {("Invalid", f"{C0}.resources.limits.memory")},
    ),
    "954Mi is more than 1G": (
        lambda: tf_job(
            replica(
                "chief", containers=tf_main(limits={"memory": "954Mi"}, requests={"memory": "1G"})
            )
        ),
        set(),
    ),
    "1Gi is 1073741824": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(limits={"memory": "1Gi"}, requests={"memory": 1073741824}),
            )
        ),
        set(),
    ),
    "1.5k is less than 2e3": (
        lambda: tf_job(
            replica("chief", containers=tf_main(limits={"cpu": "1.5k"}, requests={"cpu": "2e3"}))
        ),
        {("Invalid", f"{C0}.resources.limits.cpu")},
    ),
    "a malformed quantity is invalid": (
        lambda: tf_job(replica("chief", containers=tf_main(limits={"memory": "1.5 Gi"}))),
        {("Invalid", f"{C0}.resources.limits.memory")},
    ),
    "a negative request is invalid": (
        lambda: tf_job(replica("chief", containers=tf_main(requests={"cpu": "-1"}))),
        {("Invalid", f"{C0}.resources.requests.cpu")},
    ),
    "a resource only in limits is not compared": (
        lambda: tf_job(
            replica("chief", containers=tf_main(limits={"cpu": "1"}, requests={"memory": "9Gi"}))
        ),
        set(),
    ),
    "an extended resource limit below its request is invalid": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(limits={"nvidia.com/gpu": 1}, requests={"nvidia.com/gpu": 2}),
            )
        ),
        {("Invalid", f"{C0}.resources.limits[nvidia.com/gpu]")},
    ),
    "a GPU limit equal to its request is fine": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(limits={"nvidia.com/gpu": 2}, requests={"nvidia.com/gpu": "2"}),
            )
        ),
        set(),
    ),
    "a GPU limit above its request is invalid: no overcommit": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(limits={"nvidia.com/gpu": 2}, requests={"nvidia.com/gpu": 1}),
            )
        ),
        {("Invalid", f"{C0}.resources.limits[nvidia.com/gpu]")},
    ),
    "a GPU request without a limit needs one": (
        lambda: tf_job(replica("chief", containers=tf_main(requests={"nvidia.com/gpu": 1}))),
        {("Required", f"{C0}.resources.limits[nvidia.com/gpu]")},
    ),
    "a GPU limit alone is fine (the request defaults to it)": (
        lambda: tf_job(replica("chief", containers=tf_main(limits={"nvidia.com/gpu": 4}))),
        set(),
    ),
    "half a GPU is invalid": (
        lambda: tf_job(replica("chief", containers=tf_main(limits={"nvidia.com/gpu": "500m"}))),
        {("Invalid", f"{C0}.resources.limits[nvidia.com/gpu]")},
    ),
    "huge pages cannot be overcommitted either": (
        lambda: tf_job(
            replica(
                "chief",
                containers=tf_main(
                    limits={"hugepages-2Mi": "4Mi"}, requests={"hugepages-2Mi": "2Mi"}
                ),
            )
        ),
        {("Invalid", f"{C0}.resources.limits.hugepages-2Mi")},
    ),
    "memory below its limit is fine: native resources overcommit": (
        lambda: tf_job(
            replica(
                "chief", containers=tf_main(limits={"memory": "4Gi"}, requests={"memory": "1Gi"})
            )
        ),
        set(),
    ),
    "a sidecar's limits are checked too": (
        lambda: tf_job(
            replica(
                "chief",
                containers=[
                    *tf_main(),
                    container("log", limits={"cpu": "1m"}, requests={"cpu": "2m"}),
                ],
            )
        ),
        {("Invalid", f"{RS}[0].template.spec.containers[1].resources.limits.cpu")},
    ),
    "an init container's limits are checked too": (
        lambda: tf_job(
            {
                "type": "chief",
                "template": {
                    "spec": {
                        "initContainers": [
                            container("fetch", limits={"memory": "1M"}, requests={"memory": "1Mi"})
                        ],
                        "containers": tf_main(),
                    }
                },
            }
        ),
        {("Invalid", f"{RS}[0].template.spec.initContainers[0].resources.limits.memory")},
    ),
}

POLICIES: dict[str, Case] = {
    **{
        f"restart policy {p} is supported": (
            partial(lambda p: tf_job(replica("chief", restartPolicy=p)), p),
            set(),
        )
        for p in ("Never", "OnFailure", "Always", "ExitCode")
    },
    "an unknown restart policy is not supported": (
        lambda: tf_job(replica("chief", restartPolicy="Sometimes")),
        {("NotSupported", f"{RS}[0].restartPolicy")},
    ),
    **{
        f"clean-up policy {p} is supported": (
            partial(lambda p: tf_job(runPolicy={"cleanUpPolicy": p}), p),
            set(),
        )
        for p in ("None", "All", "Unfinished")
    },
    "Kubeflow's Running clean-pod policy is not supported": (
        lambda: tf_job(runPolicy={"cleanUpPolicy": "Running"}),
        {("NotSupported", "spec.runPolicy.cleanUpPolicy")},
    ),
    "a zero backoff limit is fine": (lambda: tf_job(runPolicy={"backoffLimit": 0}), set()),
    "a negative backoff limit is invalid": (
        lambda: tf_job(runPolicy={"backoffLimit": -1}),
        {("Invalid", "spec.runPolicy.backoffLimit")},
    ),
    "a one-second deadline is fine": (
        lambda: tf_job(runPolicy={"activeDeadlineSeconds": 1}),
        set(),
    ),
    "a zero deadline is invalid": (
        lambda: tf_job(runPolicy={"activeDeadlineSeconds": 0}),
        {("Invalid", "spec.runPolicy.activeDeadlineSeconds")},
    ),
    "zero workers next to a chief are fine": (
        lambda: tf_job(replica("chief"), replica("worker", 0)),
        set(),
    ),
    "a negative replica count is invalid": (
        lambda: tf_job(replica("chief"), replica("worker", -1)),
        {("Invalid", f"{RS}[1].replicas")},
    ),
}

NAMES: dict[str, Case] = {
    "a missing name is required": (
        lambda: tf_job() | {"metadata": {"namespace": "demo"}},
        {("Required", "metadata.name")},
    ),
    "generateName instead of a name is fine": (
        lambda: tf_job() | {"metadata": {"generateName": "mnist-"}},
        set(),
    ),
    "an empty name with generateName is fine": (
        lambda: tf_job() | {"metadata": {"name": "", "generateName": "mnist-"}},
        set(),
    ),
    "a generateName leaving no room for the random suffix is too long": (
        lambda: tf_job(replica("worker", 10)) | {"metadata": {"generateName": "a" * 50}},
        {("TooLong", "metadata.generateName")},
    ),
    "metadata that is not an object is invalid": (
        lambda: tf_job() | {"metadata": "mnist"},
        {("Invalid", "metadata")},
    ),
    "a name that is not a string is invalid": (
        lambda: tf_job() | {"metadata": {"name": 7}},
        {("Invalid", "metadata.name")},
    ),
    "a generateName that cannot start a label is invalid": (
        lambda: tf_job() | {"metadata": {"generateName": "-mnist"}},
        {("Invalid", "metadata.generateName")},
    ),
    "upper-case letters are not a DNS-1035 label": (
        lambda: tf_job(name="MNIST"),
        {("Invalid", "metadata.name")},
    ),
    "a leading digit is not a DNS-1035 label": (
        lambda: tf_job(name="1mnist"),
        {("Invalid", "metadata.name")},
    ),
    "a dot is not a DNS-1035 label": (
        lambda: tf_job(name="mnist.v2"),
        {("Invalid", "metadata.name")},
    ),
    "a name leaving exactly room for -worker-9 is fine": (
        lambda: tf_job(replica("worker", 10), name="a" * (63 - len("-worker-9"))),
        set(),
    ),
    "one more character is too long for worker 9": (
        lambda: tf_job(replica("worker", 10), name="a" * (64 - len("-worker-9"))),
        {("TooLong", "metadata.name")},
    ),
    "the eleventh worker needs one more character": (
        lambda: tf_job(replica("worker", 11), name="a" * (63 - len("-worker-9"))),
        {("TooLong", "metadata.name")},
    ),
    "a name longer than 63 is too long": (
        lambda: tf_job(name="a" * 64),
        {("TooLong", "metadata.name")},
    ),
}

RUN_MODE: dict[str, Case] = {
    "debug specs naming existing types are fine": (
        lambda: tf_job(
            runMode={
                "debug": {
                    "enabled": True,
                    "replicaSpecs": [
                        {"type": "worker", "skipInitContainer": True, "command": ["/usr/bin/sshd"]}
                    ],
                }
            }
        ),
        set(),
    ),
    "a debug spec for a type the job lacks is not supported": (
        lambda: tf_job(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "ps"}]}}),
        {("NotSupported", "spec.runMode.debug.replicaSpecs[0].type")},
    ),
    "resume specs naming existing types in any case are fine": (
        lambda: tf_job(runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "Worker"}]}}),
        set(),
    ),
    "a resume spec for a type the job lacks is not supported": (
        lambda: tf_job(
            runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "evaluator"}]}}
        ),
        {("NotSupported", "spec.runMode.pause.resumeSpecs[0].type")},
    ),
    "a type resumed twice is a duplicate": (
        lambda: tf_job(
            runMode={
                "pause": {"enabled": True, "resumeSpecs": [{"type": "worker"}, {"type": "worker"}]}
            }
        ),
        {("Duplicate", "spec.runMode.pause.resumeSpecs[1].type")},
    ),
}

SCHEDULER: dict[str, Case] = {
    "the seed's queue and priority are fine": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "default", "priority": 50}}),
        set(),
    ),
    "priorities 0 and 100 are the bounds": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "default", "priority": 0}}),
        set(),
    ),
    "priority 100 is the upper bound": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "default", "priority": 100}}),
        set(),
    ),
    "priority 101 is out of range": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "default", "priority": 101}}),
        {("Invalid", "spec.scheduler.t9kScheduler.priority")},
    ),
    "a negative priority is out of range": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "default", "priority": -1}}),
        {("Invalid", "spec.scheduler.t9kScheduler.priority")},
    ),
    "a missing queue is required": (
        lambda: tf_job(scheduler={"t9kScheduler": {"priority": 1}}),
        {("Required", "spec.scheduler.t9kScheduler.queue")},
    ),
    "an empty queue is required": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": ""}}),
        {("Required", "spec.scheduler.t9kScheduler.queue")},
    ),
    "a queue name that is no object name is invalid": (
        lambda: tf_job(scheduler={"t9kScheduler": {"queue": "Team_A"}}),
        {("Invalid", "spec.scheduler.t9kScheduler.queue")},
    ),
}

TENSORBOARD: dict[str, Case] = {
    "the seed's TensorBoard is fine": (
        lambda: tf_job(
            tensorboardSpec={
                "image": "t9kpublic/tensorboard:2.11.0",
                "trainingLogFilesets": ["t9k://pvc/tensorflow-tensorboard-pvc/log"],
            }
        ),
        set(),
    ),
    "a whole PVC is a fileset": (
        lambda: tf_job(tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/logs"]}),
        set(),
    ),
    "a URI of another scheme is invalid": (
        lambda: tf_job(tensorboardSpec={"image": "tb", "trainingLogFilesets": ["s3://bucket/log"]}),
        {("Invalid", "spec.tensorboardSpec.trainingLogFilesets[0]")},
    ),
    "an invalid PVC name is invalid": (
        lambda: tf_job(
            tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/My_PVC/log"]}
        ),
        {("Invalid", "spec.tensorboardSpec.trainingLogFilesets[0]")},
    ),
    "a path escaping the PVC is invalid": (
        lambda: tf_job(
            tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/logs/../../etc"]}
        ),
        {("Invalid", "spec.tensorboardSpec.trainingLogFilesets[0]")},
    ),
    "a TensorBoard without filesets is denied": (
        lambda: tf_job(tensorboardSpec={"image": "tb", "trainingLogFilesets": []}),
        {("Required", "spec.tensorboardSpec.trainingLogFilesets")},
    ),
    "a TensorBoard without an image is denied": (
        lambda: tf_job(tensorboardSpec={"trainingLogFilesets": ["t9k://pvc/logs"]}),
        {("Required", "spec.tensorboardSpec.image")},
    ),
    "a TensorBoard's resources are fine": (
        lambda: tf_job(tensorboardSpec=_board(limits={"cpu": "1", "memory": "1Gi"})),
        set(),
    ),
    "a TensorBoard's cpu limit below its request is invalid": (
        lambda: tf_job(tensorboardSpec=_board(limits={"cpu": "1"}, requests={"cpu": "2"})),
        {("Invalid", "spec.tensorboardSpec.resources.limits.cpu")},
    ),
    "a TensorBoard's malformed quantity is invalid": (
        lambda: tf_job(tensorboardSpec=_board(limits={"memory": "lots"})),
        {("Invalid", "spec.tensorboardSpec.resources.limits.memory")},
    ),
    "a TensorBoard's resource claims are unknown (a pod-level feature)": (
        lambda: tf_job(tensorboardSpec={**_board(), "resources": {"claims": [{"name": "x"}]}}),
        {("Forbidden", "spec.tensorboardSpec.resources")},
    ),
}


def _board(**resources: dict[str, str]) -> dict[str, Any]:
    board: dict[str, Any] = {"image": "tb", "trainingLogFilesets": ["t9k://pvc/logs"]}
    if resources:
        board["resources"] = resources
    return board


OBJECT: dict[str, Case] = {
    "another kind is not supported": (
        lambda: tf_job() | {"kind": "TFJob"},
        {("NotSupported", "kind")},
    ),
    "another API version is not supported": (
        lambda: tf_job() | {"apiVersion": "kubeflow.org/v1"},
        {("NotSupported", "apiVersion")},
    ),
    "a job without a spec is denied": (
        lambda: {k: v for k, v in tf_job().items() if k != "spec"},
        {("Required", "spec")},
    ),
    "a job without replica specs is denied": (
        lambda: tf_job() | {"spec": {}},
        {("Required", RS)},
    ),
    "a job with an empty replica spec list is denied": (
        lambda: tf_job() | {"spec": {"replicaSpecs": []}},
        {("Required", RS)},
    ),
}


@run_table(REPLICA_TYPES)
def test_replica_types_are_known_and_listed_once(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(MASTERS)
def test_every_job_has_exactly_one_master(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(TEMPLATES)
def test_pod_templates_run_the_main_container_with_an_image(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(RESOURCES)
def test_limits_cover_requests_with_exact_quantities(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(POLICIES)
def test_policies_are_known_and_counts_in_range(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(NAMES)
def test_job_names_leave_room_for_pod_names(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(RUN_MODE)
def test_debug_and_resume_specs_name_existing_types(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(SCHEDULER)
def test_scheduler_needs_a_queue_and_a_priority_in_range(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(TENSORBOARD)
def test_tensorboard_reads_logs_from_pvc_uris(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


@run_table(OBJECT)
def test_the_object_is_a_training_job_with_replica_specs(
    build: Callable[[], Job], expected: set[tuple[str, str]]
) -> None:
    assert verdict(build()) == expected


def test_unknown_replica_type_lists_the_allowed_values() -> None:
    [error] = policies.admit(tf_job(replica("chief"), replica("master"))).errors
    assert error.message == (
        'Unsupported value: "master": supported values: "chief", "worker", "ps", "evaluator"'
    )


def test_too_long_names_say_the_limit_and_why() -> None:
    [error] = policies.admit(tf_job(replica("worker", 10), name="a" * 60)).errors
    assert "may not be more than 54 characters" in error.message
    assert "worker" in error.message


def test_limit_below_request_names_the_request() -> None:
    job = tf_job(
        replica("chief", containers=tf_main(limits={"memory": "953Mi"}, requests={"memory": "1G"}))
    )
    [error] = policies.admit(job).errors
    assert error.message == (
        'Invalid value: "953Mi": must be greater than or equal to memory request of 1G'
    )


def test_malformed_quantity_message_shows_the_value_and_the_expected_form() -> None:
    job = tf_job(replica("chief", containers=tf_main(limits={"memory": "lots"})))
    [error] = policies.admit(job).errors
    assert error.message.startswith('Invalid value: "lots": must be a quantity such as 500m')


def test_immutable_update_message_says_what_may_change() -> None:
    old = tf_job(replica("chief"), replica("worker", 2))
    new = tf_job(replica("chief"), replica("worker", 3))
    [error] = policies.admit(new, old).errors
    assert error.field == f"{RS}[1].replicas"
    assert "spec.runMode.pause.enabled" in error.message


def test_pausing_a_job_stored_without_the_webhooks_defaults_is_allowed() -> None:
    """Stored while the webhook was away: the API server's schema filled in its own defaults
    (a port's protocol among them) but not the webhook's (the main container's port). On the
    next UPDATE the webhook adds the port; the stored object, defaulted for the comparison,
    must come out identical, or a pause toggle reads as a template change."""
    stored = tf_job(replica("worker", 2, restartPolicy="Never"))
    assert "ports" not in stored["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    paused = copy_with_pause(stored)
    new, _ = policies.default(paused)
    # What the API server's structural defaulting then adds to the webhook's port.
    port = new["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["ports"][0]
    assert port.setdefault("protocol", "TCP") == "TCP"
    errors, _ = policies.validate(new, stored)
    assert errors == []


def copy_with_pause(job: dict[str, Any]) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(job)
    out["spec"]["runMode"] = {"pause": {"enabled": True}}
    return out


def test_a_job_with_a_tensorboard_leaves_room_for_its_tensorboard_name() -> None:
    """The TensorBoard's Deployment and Service are named <job>-tensorboard (63 at most)."""
    board = {"image": "t9kpublic/tensorboard:2.11.0", "trainingLogFilesets": ["t9k://pvc/p/log"]}
    fits = tf_job(replica("worker", 2), name="a" * 51, tensorboardSpec=board)
    assert policies.admit(fits).errors == []
    long = tf_job(replica("worker", 2), name="a" * 52, tensorboardSpec=board)
    (error,) = policies.admit(long).errors
    assert error.field == "metadata.name"
    assert error.detail == (
        "may not be more than 51 characters: the job name plus the suffix of its TensorBoard "
        "(-tensorboard) must fit in 63"
    )
    assert policies.admit(tf_job(replica("worker", 2), name="a" * 52)).errors == []


def test_a_pod_templates_errors_come_names_first_then_main_container_then_resources() -> None:
    # The denial message lists errors in this order; the rules walk the containers once.
    pod = {
        "initContainers": [
            container("prepare", "busybox", requests={"cpu": "2"}, limits={"cpu": "1"}),
            {"image": "busybox"},
        ],
        "containers": [
            container("prepare", "busybox", limits={"memory": "lots"}),
            {"name": "tensorflow", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
        ],
    }
    job = tf_job(replica("chief", containers=[]))
    job["spec"]["replicaSpecs"][0]["template"]["spec"] = pod
    spec = f"{RS}[0].template.spec"
    assert [(e.type.value, e.field) for e in policies.admit(job).errors] == [
        ("Required", f"{spec}.initContainers[1].name"),
        ("Duplicate", f"{spec}.containers[0].name"),
        ("Required", f"{spec}.containers[1].image"),
        ("Invalid", f"{spec}.initContainers[0].resources.limits.cpu"),
        ("Invalid", f"{spec}.containers[0].resources.limits.memory"),
        ("Required", f"{spec}.containers[1].resources.limits[nvidia.com/gpu]"),
    ]
