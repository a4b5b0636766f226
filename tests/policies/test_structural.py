"""Strict decoding against the structural schema: unknown fields, wrong types, pod-level rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.fieldpath import ErrorType
from policies.structural import check, source_parts


def tf_job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "mnist", "labels": {"team": "a"}},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 4,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "metadata": {"creationTimestamp": None, "labels": {"app": "mnist"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "tensorflow/tensorflow:2.11.0",
                                    "resources": {
                                        "limits": {"cpu": 1, "memory": "2Gi"},
                                        "requests": {"cpu": "500m", "memory": "1Gi"},
                                    },
                                    "ports": [{"containerPort": 2222, "name": "tfjob-port"}],
                                }
                            ]
                        },
                    },
                }
            ],
            **spec,
        },
    }


def with_change(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of `base` (default `tf_job()`) with the dotted `path` set to `value`."""
    obj = copy.deepcopy(base or tf_job())
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = obj
    for part in parents:
        node = node[part]
    node[last] = value
    return obj


TEMPLATE = "spec.replicaSpecs.0.template"
CONTAINER = TEMPLATE + ".spec.containers.0"

ACCEPTED = {
    "the seed example": tf_job(),
    "all optional spec parts": tf_job(
        runPolicy={"cleanUpPolicy": "Unfinished", "backoffLimit": 3, "activeDeadlineSeconds": 60},
        runMode={
            "debug": {"enabled": True, "replicaSpecs": [{"type": "worker", "command": ["sh"]}]},
            "pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "args": ["-x"]}]},
        },
        scheduler={"t9kScheduler": {"queue": "default", "priority": 50}},
        tensorboardSpec={"image": "tb", "trainingLogFilesets": ["t9k://pvc/p/log"]},
    ),
    "an integral float where an integer is expected": with_change(
        "spec.replicaSpecs.0.replicas", 2.0
    ),
    "null as an absent field": with_change("spec.runPolicy", None),
    "unknown status fields (the server owns status)": {**tf_job(), "status": {"anything": 1}},
    "unknown root metadata fields (ObjectMeta is validated by the server)": with_change(
        "metadata.whatever", 1
    ),
    "a volume with an emptyDir size limit": with_change(
        TEMPLATE + ".spec.volumes",
        [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
    ),
    "an env var from a secret": with_change(
        CONTAINER + ".env",
        [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    ),
    "a probe with a named port": with_change(
        CONTAINER + ".livenessProbe", {"httpGet": {"port": "http", "path": "/"}}
    ),
}


@pytest.mark.parametrize("obj", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_well_formed_jobs_decode_without_errors(obj: dict[str, Any]) -> None:
    assert check(obj) == []


SEED_XGBOOST_WORKER = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "XGBoostTrainingJob",
    "metadata": {"name": "training-iris-xgb"},
    "spec": {
        "replicaSpecs": [
            {
                "type": "master",
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "xgboost", "image": "x"}]}},
            },
            {
                "type": "worker",
                "replicas": 2,
                "template": {"containers": [{"name": "xgboost", "image": "x"}]},
            },
        ]
    },
}

DENIED = {
    "containers directly under template (the seed XGBoost worker)": (
        SEED_XGBOOST_WORKER,
        "spec.replicaSpecs[1].template",
        ErrorType.FORBIDDEN,
        'Forbidden: unknown field "containers"',
    ),
    "an unknown spec field": (
        with_change("spec.replicaSpec", []),
        "spec",
        ErrorType.FORBIDDEN,
        'Forbidden: unknown field "replicaSpec"',
    ),
    "an unknown top-level field": (
        with_change("specs", {}),
        "",
        ErrorType.FORBIDDEN,
        'Forbidden: unknown field "specs"',
    ),
    "an unknown container field": (
        with_change(CONTAINER + ".imagePolicy", "Always"),
        "spec.replicaSpecs[0].template.spec.containers[0]",
        ErrorType.FORBIDDEN,
        'Forbidden: unknown field "imagePolicy"',
    ),
    "a string where replicas is an integer": (
        with_change("spec.replicaSpecs.0.replicas", "4"),
        "spec.replicaSpecs[0].replicas",
        ErrorType.INVALID,
        'Invalid value: "string": must be of type integer',
    ),
    "a boolean is not an integer": (
        with_change("spec.runPolicy", {"backoffLimit": True}),
        "spec.runPolicy.backoffLimit",
        ErrorType.INVALID,
        'Invalid value: "boolean": must be of type integer',
    ),
    "replicaSpecs as a map": (
        with_change("spec.replicaSpecs", {"worker": {}}),
        "spec.replicaSpecs",
        ErrorType.INVALID,
        'Invalid value: "object": must be of type array',
    ),
    "a fractional float quantity": (
        with_change(CONTAINER + ".resources.limits.cpu", 0.5),
        "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu",
        ErrorType.INVALID,
        'Invalid value: "number": must be of type integer or string (quote it: "0.5")',
    ),
    "a non-string label value": (
        with_change(TEMPLATE + ".metadata.labels.app", 7),
        "spec.replicaSpecs[0].template.metadata.labels.app",
        ErrorType.INVALID,
        'Invalid value: "integer": must be of type string',
    ),
    "a non-string value under a dotted label key": (
        with_change(TEMPLATE + ".metadata.labels", {"app.kubernetes.io/name": 7}),
        "spec.replicaSpecs[0].template.metadata.labels[app.kubernetes.io/name]",
        ErrorType.INVALID,
        'Invalid value: "integer": must be of type string',
    ),
    "an env var without a name": (
        with_change(CONTAINER + ".env", [{"value": "x"}]),
        "spec.replicaSpecs[0].template.spec.containers[0].env[0].name",
        ErrorType.REQUIRED,
        "Required value",
    ),
    "two ports with the same number and defaulted protocol": (
        with_change(CONTAINER + ".ports", [{"containerPort": 1}, {"containerPort": 1}]),
        "spec.replicaSpecs[0].template.spec.containers[0].ports[1]",
        ErrorType.DUPLICATE,
        'Duplicate value: {"containerPort": 1, "protocol": "TCP"}',
    ),
    "a finalizer listed twice in the template metadata (a set)": (
        with_change(TEMPLATE + ".metadata.finalizers", ["a/b", "a/b"]),
        "spec.replicaSpecs[0].template.metadata.finalizers[1]",
        ErrorType.DUPLICATE,
        'Duplicate value: "a/b"',
    ),
    "a null list item": (
        with_change(TEMPLATE + ".spec.containers", [None]),
        "spec.replicaSpecs[0].template.spec.containers[0]",
        ErrorType.INVALID,
        'Invalid value: "null": must be of type object',
    ),
}


@pytest.mark.parametrize(
    ("obj", "field", "error_type", "message"), DENIED.values(), ids=DENIED.keys()
)
def test_malformed_jobs_are_reported_on_the_nearest_existing_field(
    obj: dict[str, Any], field: str, error_type: ErrorType, message: str
) -> None:
    errors = check(obj)
    assert [(e.field, e.type, e.message) for e in errors] == [(field, error_type, message)]


def test_other_kinds_are_not_checked() -> None:
    assert check({"kind": "ConfigMap", "data": {"a": 1}}) == []


def test_a_non_object_is_one_invalid_error() -> None:
    assert [e.message for e in check([1, 2])] == ['Invalid value: "array": must be of type object']


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["spec", "replicaSpecs", "template", "type", "x", "containers"])
            | st.text(max_size=3),
            children,
            max_size=3,
        )
    ),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(spec=json_values, extra=json_values)
def test_check_never_raises_on_arbitrary_input(spec: Any, extra: Any) -> None:
    for kind in ("TensorFlowTrainingJob", "XGBoostTrainingJob"):
        check({"kind": kind, "spec": spec, "extra": extra})
        check(with_change("spec.replicaSpecs.0.template", spec))


COST_BOUNDS = {
    "more containers than the CRD allows": (
        with_change(TEMPLATE + ".spec.containers", [{"name": f"c{i}"} for i in range(65)]),
        "spec.replicaSpecs[0].template.spec.containers",
        "Invalid value: 65: must have at most 64 items",
    ),
    "a resume command argument over 4096 bytes": (
        tf_job(runMode={"pause": {"resumeSpecs": [{"type": "worker", "args": ["x" * 4097]}]}}),
        "spec.runMode.pause.resumeSpecs[0].args[0]",
        "Too long: may not be more than 4096 bytes",
    ),
}


@pytest.mark.parametrize(("obj", "field", "message"), COST_BOUNDS.values(), ids=COST_BOUNDS.keys())
def test_bounds_that_keep_cel_cheap_are_enforced_so_the_crd_never_refuses_what_we_admit(
    obj: dict[str, Any], field: str, message: str
) -> None:
    assert [(e.field, e.message) for e in check(obj)] == [(field, message)]


def deeply_nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


ODD_INPUTS = {
    "a list as kind": {"kind": [], "spec": {}},
    "a map as kind": {"kind": {"a": 1}},
    "nesting deeper than the recursion limit as a list-map key": with_change(
        TEMPLATE + ".spec.containers",
        [{"name": deeply_nested(5000)}, {"name": deeply_nested(5000)}],
    ),
    "nesting deeper than the recursion limit as an unknown field": with_change(
        "spec.deep", deeply_nested(5000)
    ),
}


@pytest.mark.parametrize("obj", ODD_INPUTS.values(), ids=ODD_INPUTS.keys())
def test_odd_inputs_give_errors_not_exceptions(obj: dict[str, Any]) -> None:
    for error in check(obj):
        assert str(error)


def test_the_source_of_an_unknown_field_is_the_key_itself() -> None:
    (error,) = check(SEED_XGBOOST_WORKER)
    assert source_parts(error) == ("spec", "replicaSpecs", 1, "template", "containers")


def test_the_source_of_other_errors_is_their_path() -> None:
    (error,) = check(with_change("spec.replicaSpecs.0.replicas", "4"))
    assert source_parts(error) == ("spec", "replicaSpecs", 0, "replicas")


def test_required_pod_fields_the_rules_explain_better_are_left_to_them() -> None:
    assert check(with_change(TEMPLATE + ".spec", {})) == []
    assert check(with_change(TEMPLATE + ".spec.containers", [{"image": "x"}])) == []
