"""The admission fast paths agree with the rules they shortcut.

Three checks on the valid path skip building a report when there is nothing to report:
`resources.container_resources_ok` (a cached verdict per (name, request, limit) strings instead
of `_check`'s parse of both sections) and `rules_common._containers_ok` (a pod's containers
without the bookkeeping of `_container_errors`). Each must never pass what the full rule
reports: the first is exactly `not _check(...)`, the second implies `_container_errors(...) == []`.
Both also take the fast path for the usual valid pod, or they would save nothing. The third,
`fastpath.plainly_valid`, answers for a whole job: when it passes one, the full CREATE rules
must find no error and no warning; the usual jobs take it, and each thing a rule or a warning
is about leaves it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import policies
from policies import fastpath, job, rules_common
from policies import resources as res
from policies.tensorflow import TENSORFLOW
from tests.policies.test_properties import json_values

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# native (cpu), extended (nvidia.com/gpu), huge pages, and a quota-style name
names = st.sampled_from(["cpu", "nvidia.com/gpu", "hugepages-2Mi", "requests.cpu"])
valid = st.sampled_from(["1", "2", "500m", "1Gi", "953Mi", "1G"])
others = st.one_of(st.sampled_from(["-1", "x", 1, 0.5, True, None]), json_values)
amounts = st.one_of(valid, valid, valid, valid, others)
section = st.dictionaries(names, amounts, min_size=1, max_size=3)
sections = st.one_of(section, section, section, json_values)
unpaired = st.fixed_dictionaries(
    {}, optional={"requests": sections, "limits": sections, "claims": json_values}
)
# requests and limits naming the same resources (what the comparisons are about)
paired = st.dictionaries(names, st.tuples(amounts, amounts), min_size=1, max_size=3).map(
    lambda pairs: {
        "requests": {name: low for name, (low, _) in pairs.items()},
        "limits": {name: high for name, (_, high) in pairs.items()},
    }
)
resource_dicts = st.one_of(paired, unpaired)


@SETTINGS
@given(resource_dicts)
def test_the_cached_resource_verdict_is_exactly_the_full_check(resources: dict[str, Any]) -> None:
    expected = not res._check(resources, res._NO_PATH)
    assert res.container_resources_ok(resources) is expected


def test_the_cached_resource_verdict_decides_each_kind_of_resource() -> None:
    ok = res.container_resources_ok
    assert ok({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}})
    assert not ok({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})  # limit below request
    assert not ok({"requests": {"memory": "1G"}, "limits": {"memory": "953Mi"}})
    assert ok({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}})
    assert not ok({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}})
    assert not ok({"requests": {"nvidia.com/gpu": "1"}})  # needs a limit
    assert not ok({"limits": {"nvidia.com/gpu": "0.5"}})  # whole units
    assert not ok({"requests": {"hugepages-2Mi": "1Gi"}})
    assert not ok({"limits": {"cpu": "-1"}})
    assert not ok({"requests": {"cpu": "x"}, "limits": {"cpu": "1"}})
    assert ok({"requests": {"cpu": 1}, "limits": {"cpu": "1"}})  # a number: the full check
    assert not ok({"requests": {"cpu": None}, "limits": {"cpu": "1"}})


sound = st.just({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})
container_names = st.sampled_from(["tensorflow", "sidecar"])
containers = st.fixed_dictionaries(
    {
        "name": st.one_of(
            container_names, container_names, container_names, st.just(""), json_values
        )
    },
    optional={
        "image": st.one_of(st.just("tf:2"), st.just("tf:2"), st.just(""), json_values),
        "resources": st.one_of(sound, sound, sound, resource_dicts, json_values),
    },
)
container_lists = st.lists(st.one_of(containers, containers, containers, json_values), max_size=3)


@SETTINGS
@given(container_lists)
def test_a_pod_the_fast_path_passes_has_nothing_to_report(items: list[Any]) -> None:
    if rules_common._containers_ok(TENSORFLOW.main_container, items):
        pod_spec = {"containers": items}
        assert rules_common._container_errors(TENSORFLOW, pod_spec, items, 0) == []


def test_the_usual_pod_takes_the_fast_path_and_a_broken_one_does_not() -> None:
    main = {
        "name": "tensorflow",
        "image": "tf:2",
        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
    }
    sidecar = {"name": "sidecar", "image": "busybox"}
    assert rules_common._containers_ok("tensorflow", [main])
    assert rules_common._containers_ok("tensorflow", [sidecar, main])
    assert not rules_common._containers_ok("tensorflow", [sidecar])  # no main container
    assert not rules_common._containers_ok("tensorflow", [main, dict(main)])  # a name twice
    assert not rules_common._containers_ok("tensorflow", [{**main, "image": ""}])
    broken = {**main, "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
    assert not rules_common._containers_ok("tensorflow", [broken])


# `fastpath.plainly_valid`: the usual valid jobs with up to three edits each — a value a rule or
# a warning is about put where it matters, a part added or an entry doubled, or any JSON value
# anywhere (or a removal).
USUAL_JOBS = (
    "examples/tensorflow-mnist.yaml",
    "examples/xgboost-iris.yaml",
    "examples/tensorflow-pausable.yaml",
    "examples/training/xgboost-dist.yaml",
)


def defaulted_jobs(path: str) -> list[dict[str, Any]]:
    docs = yaml.safe_load_all((ROOT / path).read_text())
    return [
        policies.default(d)[0] for d in docs if isinstance(d, dict) and d.get("kind") in job.SPECS
    ]


BASES = [obj for path in USUAL_JOBS for obj in defaulted_jobs(path)]
TYPES = ["chief", "worker", "ps", "evaluator", "master", "Worker", ""]
BY_KEY: dict[str, list[Any]] = {
    "type": TYPES,
    "replicas": [-1, 0, 1, 2, 11, 1001, True],
    "restartPolicy": ["Never", "Always", "x"],
    "name": ["", "A", "a" * 50, "a" * 55, "tensorflow", "xgboost", "sidecar", "-x"],
    "image": ["", None],
    "resources": [{}, {"requests": {"cpu": "1"}}, None],
    "limits": [{}, {"cpu": "100m"}, {"nvidia.com/gpu": "1"}],
    "cpu": ["100m", "3", "-1", "x", 1],
    "memory": ["1Ki", "100Gi"],
    "cleanUpPolicy": ["None", "All", "x"],
    "backoffLimit": [-1, 0],
    "activeDeadlineSeconds": [0, 1],
    "queue": ["", "Q", "q"],
    "priority": [500, -1, 0],
    "enabled": [True, None],
}
# What may be added, under a dict that has the first key: the key and its possible values.
ADDED: list[tuple[str, str, list[Any]]] = [
    ("containers", "initContainers", [[{"name": "tensorflow"}], [{"name": "i", "image": "x"}]]),
    ("containers", "restartPolicy", ["Never"]),
    ("replicaSpecs", "tensorboardSpec", [{"image": ""}, {"image": "tb"}]),
    ("replicaSpecs", "runMode", [{"debug": {"enabled": True}}, {"pause": {"enabled": False}}]),
    ("replicaSpecs", "scheduler", [{"t9kScheduler": {"queue": "default", "priority": 101}}]),
    ("replicaSpecs", "other", [1]),
    ("template", "replicas", [-1, 0, 2]),
    ("enabled", "resumeSpecs", [[{"type": "worker"}, {"type": "worker"}], [{"type": "x"}]]),
]
JOB_NAMES = ["x", "a" * 53, "a" * 54, "a" * 55, "a" * 63, "a" * 64, "A", "a_b", "", None]
REMOVE = object()


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for key, child in items:
        out.append((*prefix, key))
        if isinstance(child, dict | list):
            out.extend(paths_in(child, (*prefix, key)))
    return out


@st.composite
def near_valid_jobs(draw: st.DrawFn) -> dict[str, Any]:
    obj = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(0, 3))):
        paths = paths_in(obj)
        containers = [()] + [p for p in paths if isinstance(at(obj, p), dict | list)]
        how = draw(st.sampled_from(["by key", "by key", "add", "double", "rename", "anything"]))
        keys = [k for k in BY_KEY if any(p[-1] == k for p in paths)]
        if how == "rename" and isinstance(obj.get("metadata"), dict):
            path, value = ("metadata", "name"), draw(st.sampled_from(JOB_NAMES))
        elif how == "by key" and keys:
            key = draw(st.sampled_from(keys))
            path = draw(st.sampled_from([p for p in paths if p[-1] == key]))
            value = draw(st.sampled_from(BY_KEY[key]))
        elif how == "add":
            marker, key, values = draw(st.sampled_from(ADDED))
            parents = [
                p for p in containers if isinstance(at(obj, p), dict) and marker in at(obj, p)
            ]
            if not parents:
                continue
            path, value = (*draw(st.sampled_from(parents)), key), draw(st.sampled_from(values))
        elif how == "double":
            lists = [p for p in containers if isinstance(at(obj, p), list) and at(obj, p)]
            if not lists:
                continue
            items = at(obj, draw(st.sampled_from(lists)))
            items.append(copy.deepcopy(draw(st.sampled_from(items))))
            continue
        else:
            path = draw(st.sampled_from(paths))
            value = draw(st.one_of(st.just(REMOVE), json_values))
        node = at(obj, path[:-1])
        if value is REMOVE:
            del node[path[-1]]
        else:
            node[path[-1]] = copy.deepcopy(value)  # (a later edit may go inside it)
    return obj


def at(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(near_valid_jobs())
def test_a_job_the_fast_path_passes_has_nothing_to_report(obj: Any) -> None:
    if not isinstance(obj.get("kind"), str) or obj["kind"] not in job.SPECS:
        return  # (the edit replaced the kind: not a job the rules run on)
    kind = job.SPECS[obj["kind"]]
    taken = fastpath.plainly_valid(kind, obj)
    event(f"fast path taken: {taken}")  # (see --hypothesis-show-statistics: both occur)
    if taken:
        assert job._full_rules(kind, obj, None) == ([], [])


@pytest.mark.parametrize("path", USUAL_JOBS)
def test_the_usual_jobs_take_the_fast_path(path: str) -> None:
    for obj in defaulted_jobs(path):
        assert fastpath.plainly_valid(job.SPECS[obj["kind"]], obj)


def test_each_thing_a_rule_or_a_warning_is_about_leaves_the_fast_path() -> None:
    obj, _ = policies.default(yaml.safe_load((ROOT / "examples/tensorflow-mnist.yaml").read_text()))
    assert fastpath.plainly_valid(TENSORFLOW, obj)
    edits: list[tuple[str, Any]] = [
        ("metadata.name", "M"),
        ("metadata.name", "a" * 55),  # fits alone, not with "-worker-1"
        ("spec.replicaSpecs.1.type", "ps"),  # a type twice
        ("spec.replicaSpecs.1.replicas", 1001),  # warned about
        ("spec.replicaSpecs.1.restartPolicy", "Sometimes"),
        ("spec.replicaSpecs.0.replicas", 2),  # the chief must have 1
        ("spec.replicaSpecs.0.template.spec.restartPolicy", "Never"),  # ignored: warned about
        ("spec.replicaSpecs.0.template.spec.containers.0.name", "main"),
        ("spec.replicaSpecs.0.template.spec.containers.0.image", ""),
        ("spec.replicaSpecs.0.template.spec.containers.0.resources.limits", {}),  # warned
        ("spec.replicaSpecs.0.template.spec.containers.0.resources.limits.cpu", "100m"),
        ("spec.replicaSpecs.0.template.spec.initContainers", [{"name": "tensorflow"}]),
        ("spec.runPolicy.cleanUpPolicy", "None"),  # with a parameter server: warned about
        ("spec.runPolicy.backoffLimit", -1),
        ("spec.runPolicy.activeDeadlineSeconds", 0),
        ("spec.scheduler", {"t9kScheduler": {"queue": "Q"}}),
        ("spec.runMode", {"pause": {"enabled": True}}),  # warned about
        ("spec.runMode", {"pause": {"enabled": False, "resumeSpecs": [{"type": "evaluator"}]}}),
        ("spec.tensorboardSpec", {"image": "tb", "trainingLogFilesets": ["t9k://pvc/a/b"]}),
    ]
    for path, value in edits:
        edited = copy.deepcopy(obj)
        *parents, last = path.split(".")
        node: Any = edited
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
        assert not fastpath.plainly_valid(TENSORFLOW, edited), path
        assert (
            job._full_rules(TENSORFLOW, edited, None) != ([], []) or path == "spec.tensorboardSpec"
        )
