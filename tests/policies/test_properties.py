"""Properties over generated input: defaulting is idempotent and exact, validation never raises.

Two generators: arbitrary JSON-like values, and near-valid jobs in which any field may be
replaced by an arbitrary JSON value (the inputs that reach deep into the rules).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policies
from policies.fieldpath import FieldError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes anything at all."""
    return st.one_of(good, good, good, json_values)


quantities = st.sampled_from(
    ["1", "500m", "0.5", "1Gi", "953Mi", "1G", "1e3", "-1", "1.5 Gi", 2, 0]
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": field(st.dictionaries(st.sampled_from(["cpu", "memory"]), field(quantities))),
        "limits": field(st.dictionaries(st.sampled_from(["cpu", "memory"]), field(quantities))),
    },
)
containers = st.fixed_dictionaries(
    {"name": field(st.sampled_from(["tensorflow", "xgboost", "sidecar", ""]))},
    optional={
        "image": field(st.sampled_from(["tf:2", ""])),
        "resources": field(resources),
        "ports": field(
            st.lists(st.fixed_dictionaries({"name": st.sampled_from(["tfjob-port", "x"])}))
        ),
    },
)
templates = st.fixed_dictionaries(
    {},
    optional={
        "spec": field(
            st.fixed_dictionaries(
                {"containers": field(st.lists(field(containers), max_size=3))},
                optional={"initContainers": field(st.lists(field(containers), max_size=2))},
            )
        ),
        "containers": st.lists(containers, max_size=1),
    },
)
types = st.sampled_from(["chief", "worker", "ps", "evaluator", "master", "Worker", "MASTER", ""])
replica_specs = st.fixed_dictionaries(
    {"type": field(types)},
    optional={
        "replicas": field(st.integers(min_value=-2, max_value=12)),
        "restartPolicy": field(st.sampled_from(["Never", "OnFailure", "Always", "ExitCode", "x"])),
        "template": field(templates),
    },
)
mode_specs = st.lists(field(st.fixed_dictionaries({"type": field(types)})), max_size=3)
specs = st.fixed_dictionaries(
    {"replicaSpecs": field(st.lists(field(replica_specs), max_size=5))},
    optional={
        "runPolicy": field(
            st.fixed_dictionaries(
                {},
                optional={
                    "cleanUpPolicy": field(st.sampled_from(["None", "All", "Unfinished", "x"])),
                    "backoffLimit": field(st.integers(-2, 5)),
                    "activeDeadlineSeconds": field(st.integers(-1, 5)),
                },
            )
        ),
        "runMode": field(
            st.fixed_dictionaries(
                {},
                optional={
                    "debug": field(
                        st.fixed_dictionaries(
                            {"enabled": field(st.booleans()), "replicaSpecs": field(mode_specs)}
                        )
                    ),
                    "pause": field(
                        st.fixed_dictionaries(
                            {"enabled": field(st.booleans()), "resumeSpecs": field(mode_specs)}
                        )
                    ),
                },
            )
        ),
        "scheduler": field(
            st.fixed_dictionaries(
                {
                    "t9kScheduler": field(
                        st.fixed_dictionaries(
                            {
                                "queue": field(st.sampled_from(["default", "", "A_b"])),
                                "priority": field(st.integers(-5, 105)),
                            }
                        )
                    )
                }
            )
        ),
        "tensorboardSpec": field(
            st.fixed_dictionaries(
                {
                    "image": field(st.just("tb")),
                    "trainingLogFilesets": field(
                        st.lists(field(st.sampled_from(["t9k://pvc/a/b", "t9k://pvc/A", "s3://x"])))
                    ),
                }
            )
        ),
    },
)
jobs = st.fixed_dictionaries(
    {
        "apiVersion": field(st.just("batch.tensorstack.dev/v1beta1")),
        "kind": st.sampled_from(["TensorFlowTrainingJob", "XGBoostTrainingJob"]),
        "metadata": field(
            st.fixed_dictionaries({"name": field(st.sampled_from(["mnist", "A", "x" * 60]))})
        ),
        "spec": field(specs),
    }
)
anything = st.one_of(json_values, jobs)


@SETTINGS
@given(anything)
def test_defaulting_is_idempotent_and_its_patch_is_exact(obj: Any) -> None:
    before = copy.deepcopy(obj)
    out, patch = policies.default(obj)
    assert obj == before
    if isinstance(obj, dict):
        assert jsonpatch.apply_patch(obj, patch) == out
    else:
        assert patch == [] and out == obj
    again, second = policies.default(out)
    assert second == [] and again == out


@SETTINGS
@given(anything)
def test_the_patch_alone_is_the_patch_of_default_and_leaves_the_input_alone(obj: Any) -> None:
    before = copy.deepcopy(obj)
    assert policies.default_patch(obj) == policies.default(obj)[1]
    assert obj == before


@SETTINGS
@given(anything, st.one_of(st.none(), anything))
def test_admission_never_raises_and_returns_field_errors(obj: Any, old: Any) -> None:
    admission = policies.admit(obj, old)
    assert all(isinstance(e, FieldError) and str(e) for e in admission.errors)
    assert all(isinstance(w, str) and len(w) < 120 for w in admission.warnings)


@SETTINGS
@given(anything)
def test_validate_never_raises_on_undefaulted_input(obj: Any) -> None:
    errors, warnings = policies.validate(obj, obj)
    assert isinstance(errors, list) and isinstance(warnings, list)


@SETTINGS
@given(jobs)
def test_a_job_is_never_reported_twice_for_the_same_field_and_reason(obj: Any) -> None:
    errors = policies.admit(obj).errors
    keys = [(e.type, e.field, e.detail) for e in errors]
    assert len(keys) == len(set(keys))


def nested_lists(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def test_nesting_deeper_than_the_recursion_limit_is_reported_not_raised() -> None:
    # Deep enough to overflow the C stack of code without a recursion limit (the compiled
    # build's, hack/compiled-tests): 100,000 levels did.
    deep = nested_lists(1_000_000)
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "deep"},
        "spec": {"replicaSpecs": [{"type": "worker", "junk": deep}]},
    }
    out, patch = policies.default(job)
    assert out["spec"]["replicaSpecs"][0]["replicas"] == 1 and patch
    created = policies.admit(job)
    assert 'spec.replicaSpecs[0]: Forbidden: unknown field "junk"' in map(str, created.errors)
    updated = policies.admit(job, job)
    assert [e.detail for e in updated.errors] == ["is nested too deeply to be checked"]


@given(st.dictionaries(st.sampled_from(["kind", "apiVersion", "spec", "metadata"]), json_values))
def test_objects_with_any_kind_value_never_raise(obj: dict[str, Any]) -> None:
    out, _ = policies.default(obj)
    assert out == obj
    policies.admit(obj, obj)
