"""The admission fast paths agree with the rules they shortcut.

Two checks on the valid path skip building a report when there is nothing to report:
`resources.container_resources_ok` (a cached verdict per (name, request, limit) strings instead
of `_check`'s parse of both sections) and `rules_common._containers_ok` (a pod's containers
without the bookkeeping of `_container_errors`). Each must never pass what the full rule
reports: the first is exactly `not _check(...)`, the second implies `_container_errors(...) == []`.
Both also take the fast path for the usual valid pod, or they would save nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import resources as res
from policies import rules_common
from policies.tensorflow import TENSORFLOW
from tests.policies.test_properties import json_values

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
