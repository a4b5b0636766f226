"""Pod events name the container they are about as a real kubelet does (`involvedObject`)."""

from __future__ import annotations

import pytest

from localcluster.client.events import pod_event

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
    "spec": {
        "initContainers": [{"name": "fetch"}],
        "containers": [{"name": "main"}],
    },
}


@pytest.mark.parametrize(
    ("container", "field_path"),
    [
        pytest.param("main", "spec.containers{main}", id="container"),
        pytest.param("fetch", "spec.initContainers{fetch}", id="init-container"),
        pytest.param("", None, id="the-pod-itself"),
    ],
)
def test_the_field_path_names_the_container_list_it_is_in(
    container: str, field_path: str | None
) -> None:
    event = pod_event(
        POD, "Started", "m", now="2026-01-01T00:00:00Z", suffix="18", container=container
    )
    assert event["involvedObject"].get("fieldPath") == field_path
    assert event["metadata"] == {"name": "p.18", "namespace": "ns"}
