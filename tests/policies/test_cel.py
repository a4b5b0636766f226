"""The CRDs enforce what `policies.admit` enforces, wherever CEL and OpenAPI can say it.

A "server" here is what an API server does with our CRD on its own (no webhook): the OpenAPI
value constraints (enum, minimum, maximum, pattern, minItems, maxItems, minLength, required),
`x-kubernetes-list-type: map` key uniqueness, and the CEL rules evaluated with cel-python. Each
fixture runs through `policies.admit` and through that server, on the defaulted object (CEL
runs after mutation), and both must agree on the verdict, with paths that point at the same
place (one a prefix of the other).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

import policies
from policies import cel, update
from policies.fieldpath import ErrorType

Job = dict[str, Any]


def container(name: str = "tensorflow", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "img", **extra}


def replica(
    rtype: str, replicas: int = 1, main: str = "tensorflow", **extra: Any
) -> dict[str, Any]:
    return {
        "type": rtype,
        "replicas": replicas,
        "template": {"spec": {"containers": [container(main)]}},
        **extra,
    }


def tf(*replicas: dict[str, Any], **spec: Any) -> Job:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "job"},
        "spec": {"replicaSpecs": list(replicas or [replica("worker", 2)]), **spec},
    }


def xgb(*replicas: dict[str, Any], **spec: Any) -> Job:
    specs = replicas or (replica("master", main="xgboost"), replica("worker", 2, main="xgboost"))
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "XGBoostTrainingJob",
        "metadata": {"name": "job"},
        "spec": {"replicaSpecs": list(specs), **spec},
    }


def edit(job: Job, change: Callable[[Job], Any]) -> Job:
    out = copy.deepcopy(job)
    change(out)
    return out


def server_errors(obj: Job, old: Job | None = None) -> list[tuple[tuple[Any, ...], str]]:
    """(path, message) of what the CRD alone rejects in `obj`."""
    schema = cel.schema_with_rules(obj["kind"])
    out = [
        (tuple(e.absolute_path), e.message)
        for e in jsonschema.Draft7Validator(schema).iter_errors(obj)
    ]
    out.extend(_list_map_duplicates(schema, obj, ()))
    out.extend((e.path.plain_parts(), e.message) for e in cel.evaluate(obj["kind"], obj, old))
    return out


def _list_map_duplicates(
    schema: dict[str, Any], value: Any, path: tuple[Any, ...]
) -> list[tuple[tuple[Any, ...], str]]:
    out: list[tuple[tuple[Any, ...], str]] = []
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                out.extend(_list_map_duplicates(sub, value[key], (*path, key)))
    elif isinstance(value, list) and "items" in schema:
        keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        seen: list[Any] = []
        for i, item in enumerate(value):
            if keys and isinstance(item, dict):
                key = [item.get(k) for k in keys]
                if key in seen:
                    out.append(((*path, i), "Duplicate value"))
                seen.append(key)
            out.extend(_list_map_duplicates(schema["items"], item, (*path, i)))
    return out


def related(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


ADMITTED: dict[str, tuple[Job, Job | None]] = {
    "TF workers only": (tf(), None),
    "TF chief, workers, ps and evaluator": (
        tf(replica("chief"), replica("worker", 3), replica("ps", 2), replica("evaluator")),
        None,
    ),
    "TF chief alone": (tf(replica("chief")), None),
    "TF upper-case types (lower-cased by defaulting)": (tf(replica("Worker", 2)), None),
    "TF with every option": (
        tf(
            runPolicy={"cleanUpPolicy": "All", "backoffLimit": 0, "activeDeadlineSeconds": 1},
            scheduler={"t9kScheduler": {"queue": "team.gpu-a", "priority": 100}},
            tensorboardSpec={
                "image": "tb",
                "trainingLogFilesets": ["t9k://pvc/logs/a/./b", "t9k://pvc/logs"],
            },
            runMode={
                "debug": {"enabled": True, "replicaSpecs": [{"type": "worker", "command": ["sh"]}]},
                "pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "args": ["-v"]}]},
            },
        ),
        None,
    ),
    "XGB master and workers": (xgb(), None),
    "XGB master alone": (xgb(replica("master", main="xgboost")), None),
    "update toggling pause.enabled": (
        tf(runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "worker"}]}}),
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker"}]}}),
    ),
    "update of the mutable run policy and TensorBoard": (
        tf(
            runPolicy={"backoffLimit": 5},
            tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/p"]},
        ),
        tf(runPolicy={"backoffLimit": 1}),
    ),
    "update keeping no resume specs": (
        tf(runMode={"pause": {"enabled": True}}),
        tf(),
    ),
}

DENIED: dict[str, tuple[Job, Job | None]] = {
    "TF unknown type": (tf(replica("master")), None),
    "TF duplicate type": (tf(replica("worker"), replica("worker")), None),
    "TF chief with 2 replicas": (tf(replica("chief", 2)), None),
    "TF evaluator with 2 replicas": (tf(replica("worker"), replica("evaluator", 2)), None),
    "TF no chief and no worker replicas": (tf(replica("worker", 0), replica("ps", 1)), None),
    "TF parameter servers only": (tf(replica("ps", 2)), None),
    "TF negative replicas": (tf(replica("worker"), replica("ps", -1)), None),
    "TF bad restart policy": (tf(replica("worker", restartPolicy="Sometimes")), None),
    "TF no main container": (tf(replica("worker", main="main")), None),
    "TF main container without image": (
        edit(
            tf(),
            lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].pop(
                "image"
            ),
        ),
        None,
    ),
    "TF no template": (edit(tf(), lambda j: j["spec"]["replicaSpecs"][0].pop("template")), None),
    "TF template without spec": (
        edit(tf(), lambda j: j["spec"]["replicaSpecs"][0].update(template={})),
        None,
    ),
    "TF no containers": (
        edit(
            tf(), lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"].update(containers=[])
        ),
        None,
    ),
    "TF empty replica specs": (edit(tf(), lambda j: j["spec"].update(replicaSpecs=[])), None),
    "bad clean-up policy": (tf(runPolicy={"cleanUpPolicy": "Some"}), None),
    "negative backoff limit": (tf(runPolicy={"backoffLimit": -1}), None),
    "zero active deadline": (tf(runPolicy={"activeDeadlineSeconds": 0}), None),
    "empty queue": (tf(scheduler={"t9kScheduler": {"queue": ""}}), None),
    "missing queue": (tf(scheduler={"t9kScheduler": {"priority": 1}}), None),
    "queue not a DNS subdomain": (tf(scheduler={"t9kScheduler": {"queue": "Team_A"}}), None),
    "priority above the range": (
        tf(scheduler={"t9kScheduler": {"queue": "q", "priority": 101}}),
        None,
    ),
    "priority below the range": (
        tf(scheduler={"t9kScheduler": {"queue": "q", "priority": -1}}),
        None,
    ),
    "fileset not a t9k URI": (
        tf(tensorboardSpec={"image": "tb", "trainingLogFilesets": ["s3://b/log"]}),
        None,
    ),
    "fileset with a .. segment": (
        tf(tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/p/a/../b"]}),
        None,
    ),
    "fileset with a bad PVC name": (
        tf(tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/P_V/log"]}),
        None,
    ),
    "tensorboard without image": (
        tf(tensorboardSpec={"trainingLogFilesets": ["t9k://pvc/p"]}),
        None,
    ),
    "tensorboard without filesets": (
        tf(tensorboardSpec={"image": "tb", "trainingLogFilesets": []}),
        None,
    ),
    "debug type the job lacks": (
        tf(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "ps"}]}}),
        None,
    ),
    "resume type the job lacks": (
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "chief"}]}}),
        None,
    ),
    "XGB no master": (xgb(replica("worker", 2, main="xgboost")), None),
    "XGB master with 2 replicas": (xgb(replica("master", 2, main="xgboost")), None),
    "XGB chief is not a type": (
        xgb(replica("master", main="xgboost"), replica("chief", main="xgboost")),
        None,
    ),
    "XGB main container is xgboost": (xgb(replica("master")), None),
    "update changing resume specs": (
        tf(
            runMode={
                "pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "command": ["b"]}]}
            }
        ),
        tf(
            runMode={
                "pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "command": ["a"]}]}
            }
        ),
    ),
    "update adding resume specs": (
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker"}]}}),
        tf(),
    ),
    "update changing a replica count": (
        tf(replica("worker", 3)),
        tf(replica("worker", 2)),
    ),
    "update changing a restart policy": (
        tf(replica("worker", 2, restartPolicy="Always")),
        tf(replica("worker", 2, restartPolicy="Never")),
    ),
    "update adding a replica type": (
        tf(replica("worker", 2), replica("ps")),
        tf(replica("worker", 2)),
    ),
    "update reordering replica types": (
        tf(replica("ps"), replica("worker", 2)),
        tf(replica("worker", 2), replica("ps")),
    ),
    "update changing the queue": (
        tf(scheduler={"t9kScheduler": {"queue": "b"}}),
        tf(scheduler={"t9kScheduler": {"queue": "a"}}),
    ),
    "update adding a scheduler": (
        tf(scheduler={"t9kScheduler": {"queue": "b"}}),
        tf(),
    ),
    "update removing resume specs": (
        tf(runMode={"pause": {"enabled": True}}),
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker"}]}}),
    ),
}


def stored(obj: Job) -> Job:
    """The object as a server would store it: after the mutating webhook's defaults."""
    return policies.default(obj)[0]


@pytest.mark.parametrize(("obj", "old"), ADMITTED.values(), ids=ADMITTED.keys())
def test_what_admit_allows_the_crd_allows(obj: Job, old: Job | None) -> None:
    admission = policies.admit(obj, old)
    assert admission.errors == []
    assert server_errors(admission.obj, None if old is None else stored(old)) == []


@pytest.mark.parametrize(("obj", "old"), DENIED.values(), ids=DENIED.keys())
def test_what_admit_denies_the_crd_denies_at_the_same_place(obj: Job, old: Job | None) -> None:
    admission = policies.admit(obj, old)
    found = server_errors(admission.obj, None if old is None else stored(old))
    assert admission.errors, "fixture must be denied by policies.admit"
    assert found, "the CRD alone lets this through"
    python_paths = [e.path.plain_parts() for e in admission.errors]
    for path, message in found:
        assert any(related(path, p) for p in python_paths), (path, message, python_paths)
    # Where a Python rule reports the same kind of error (reason) at a place related to a CEL
    # error's, with words of its own, the CEL error says those words: a cluster without the
    # webhook refuses as the webhook does. (Rules over a whole list stop their path at the list.)
    python_errors = [(e.path.plain_parts(), e.type, e.detail) for e in admission.errors]
    for error in cel.evaluate(obj["kind"], admission.obj, None if old is None else stored(old)):
        words = {
            d
            for p, t, d in python_errors
            if d and t == error.type and related(error.path.plain_parts(), p)
        }
        assert not words or error.detail in words, (error, words)


WEBHOOK_ONLY: dict[str, Job] = {
    "limits below requests (quantities)": edit(
        tf(),
        lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].update(
            resources={"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}
        ),
    ),
    "a name too long for the derived pod names": edit(
        tf(), lambda j: j["metadata"].update(name="a" * 55)
    ),
}


@pytest.mark.parametrize("obj", WEBHOOK_ONLY.values(), ids=WEBHOOK_ONLY.keys())
def test_rules_cel_cannot_express_are_left_to_the_webhook(obj: Job) -> None:
    admission = policies.admit(obj)
    assert admission.errors
    assert server_errors(admission.obj) == []


def test_every_rule_message_and_reason_is_what_the_python_rule_says() -> None:
    job = tf(replica("chief", 2))
    (python,) = [e for e in policies.admit(job).errors]
    (server,) = cel.evaluate("TensorFlowTrainingJob", policies.admit(job).obj)
    assert (server.type, server.detail) == (python.type, python.detail)
    # Rules over the whole list (planned once per write, not once per replica type) cannot
    # name the item: the path stops at the list, a prefix of the webhook's.
    assert (server.field, python.field) == ("spec.replicaSpecs", "spec.replicaSpecs[0].replicas")


ONE_RULE_TWO_MESSAGES: dict[str, tuple[Job, str, str]] = {
    "chief with 2 replicas": (
        tf(replica("chief", 2)),
        "spec.replicaSpecs",
        "chief must have exactly 1 replica: it is the master of the job",
    ),
    "evaluator with 2 replicas": (
        tf(replica("worker"), replica("evaluator", 2)),
        "spec.replicaSpecs",
        "evaluator may have at most 1 replica",
    ),
    "no main container": (
        tf(replica("worker", main="main")),
        "spec.replicaSpecs[0].template.spec.containers",
        'a container named "tensorflow" runs the training',
    ),
    "main container without image": (
        edit(
            tf(),
            lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].update(
                image=""
            ),
        ),
        "spec.replicaSpecs[0].template.spec.containers",
        'the "tensorflow" container needs an image',
    ),
    "no template": (
        edit(tf(), lambda j: j["spec"]["replicaSpecs"][0].pop("template")),
        "spec.replicaSpecs",
        "a pod template for the replicas is required",
    ),
    "no containers": (
        edit(
            tf(), lambda j: j["spec"]["replicaSpecs"][0]["template"]["spec"].update(containers=[])
        ),
        "spec.replicaSpecs[0].template.spec.containers",
        'at least one container, named "tensorflow"',
    ),
    "debug type the job lacks": (
        tf(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "ps"}]}}),
        "spec.runMode",
        "each debug replicaSpecs type must be a replica type of this job",
    ),
    "resume type the job lacks": (
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "ps"}]}}),
        "spec.runMode",
        "each pause resumeSpecs type must be a replica type of this job",
    ),
    "XGB master with 2 replicas": (
        xgb(replica("master", 2, main="xgboost")),
        "spec.replicaSpecs",
        "master must have exactly 1 replica: it is the master of the job",
    ),
    "XGB no master": (
        xgb(replica("worker", 2, main="xgboost")),
        "spec.replicaSpecs",
        'a replica spec of type "master" with 1 replica is required',
    ),
    "template without spec": (
        edit(tf(), lambda j: j["spec"]["replicaSpecs"][0].update(template={})),
        "spec.replicaSpecs",
        "a pod template with spec.containers is required",
    ),
}


@pytest.mark.parametrize(
    ("obj", "field", "message"), ONE_RULE_TWO_MESSAGES.values(), ids=ONE_RULE_TWO_MESSAGES.keys()
)
def test_a_rule_with_two_cases_says_which_one_failed(obj: Job, field: str, message: str) -> None:
    errors = cel.evaluate(obj["kind"], policies.admit(obj).obj)
    assert [(e.field, e.detail) for e in errors] == [(field, message)]


TRANSITION_CASES: dict[str, tuple[Job, Job, str, str]] = {
    "a type added": (
        tf(replica("worker", 2), replica("ps")),
        tf(replica("worker", 2)),
        "spec.replicaSpecs",
        update.TYPES_IMMUTABLE_DETAIL,
    ),
    "types reordered": (
        tf(replica("ps"), replica("worker", 2)),
        tf(replica("worker", 2), replica("ps")),
        "spec.replicaSpecs",
        update.TYPES_IMMUTABLE_DETAIL,
    ),
    "a count changed": (
        tf(replica("worker", 2), replica("ps", 2)),
        tf(replica("worker", 2), replica("ps", 1)),
        "spec.replicaSpecs[1].replicas",
        update.IMMUTABLE_DETAIL,
    ),
    "a restart policy changed": (
        tf(replica("worker", 2), replica("ps", restartPolicy="Always")),
        tf(replica("worker", 2), replica("ps", restartPolicy="OnFailure")),
        "spec.replicaSpecs[1].restartPolicy",
        update.IMMUTABLE_DETAIL,
    ),
    "the queue changed": (
        tf(scheduler={"t9kScheduler": {"queue": "b"}}),
        tf(scheduler={"t9kScheduler": {"queue": "a"}}),
        "spec.scheduler.t9kScheduler",
        update.IMMUTABLE_DETAIL,
    ),
    "the scheduler removed": (
        tf(),
        tf(scheduler={"t9kScheduler": {"queue": "a"}}),
        "spec",
        update.IMMUTABLE_DETAIL,
    ),
    "resume specs changed": (
        tf(
            runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "args": ["b"]}]}}
        ),
        tf(
            runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker", "args": ["a"]}]}}
        ),
        "spec.runMode.pause.resumeSpecs",
        update.RESUME_IMMUTABLE_DETAIL,
    ),
    "resume specs added": (
        tf(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "worker"}]}}),
        tf(),
        "spec",
        update.RESUME_IMMUTABLE_DETAIL,
    ),
}


@pytest.mark.parametrize(
    ("obj", "old", "field", "message"),
    TRANSITION_CASES.values(),
    ids=TRANSITION_CASES.keys(),
)
def test_each_transition_case_is_forbidden_with_the_webhooks_words_at_its_place(
    obj: Job, old: Job, field: str, message: str
) -> None:
    errors = cel.evaluate(obj["kind"], policies.admit(obj).obj, stored(old))
    assert [(e.field, e.type, e.detail) for e in errors] == [(field, ErrorType.FORBIDDEN, message)]


@pytest.mark.parametrize("kind", policies.KINDS)
def test_no_rule_reads_the_pod_spec_through_a_replica(kind: str) -> None:
    """Each field a rule reads costs a server a copy of the schemas of all properties of the
    object it is read from, on every write, status writes included (issue #19): reading
    `template.spec.containers` from a replica copies PodSpec's 40. Only the rule on
    `containers` itself reads pod fields (the containers' names and images)."""
    for location, entries in cel.rules(kind).items():
        for rule in entries:
            assert "template.spec." not in rule.rule, (location, rule.rule)


@pytest.mark.parametrize("kind", policies.KINDS)
def test_every_rule_is_attached_to_an_existing_schema_node(kind: str) -> None:
    schema = cel.schema_with_rules(kind)
    attached = []

    def walk(node: dict[str, Any]) -> None:
        attached.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
        for sub in node.get("properties", {}).values():
            walk(sub)
        if "items" in node:
            walk(node["items"])

    walk(schema)
    assert sorted(attached) == sorted(r.rule for rs in cel.rules(kind).values() for r in rs)


@pytest.mark.parametrize("kind", policies.KINDS)
def test_transition_rules_say_the_webhooks_immutability_messages(kind: str) -> None:
    transition = [r for rs in cel.rules(kind).values() for r in rs if r.is_transition]
    messages = {r.message for r in transition} | {
        literal for r in transition for literal in re.findall(r"'([^']*)'", r.message_expression)
    }
    assert messages == {
        update.IMMUTABLE_DETAIL,
        update.TYPES_IMMUTABLE_DETAIL,
        update.RESUME_IMMUTABLE_DETAIL,
    }


def test_pausing_a_job_stored_before_its_restart_policy_default_is_allowed() -> None:
    """An object stored without the webhook's defaults (webhook down, or an older release)
    gets them on its next UPDATE; toggling pause must not read as changing restartPolicy."""
    old = tf(replica("worker", 2))
    assert "restartPolicy" not in old["spec"]["replicaSpecs"][0]
    new = edit(old, lambda j: j["spec"].update(runMode={"pause": {"enabled": True}}))
    admission = policies.admit(new, old)
    assert admission.errors == []
    assert admission.obj["spec"]["replicaSpecs"][0]["restartPolicy"] == "Never"
    assert server_errors(admission.obj, old) == []


def test_changing_a_defaulted_restart_policy_is_still_denied() -> None:
    old = tf(replica("worker", 2))
    new = tf(replica("worker", 2, restartPolicy="Always"))
    errors = cel.evaluate("TensorFlowTrainingJob", policies.default(new)[0], old)
    assert [(e.field, e.detail) for e in errors] == [
        ("spec.replicaSpecs[0].restartPolicy", update.IMMUTABLE_DETAIL)
    ]
