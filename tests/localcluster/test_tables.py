"""Server-side printing: the Table answers behind `kubectl get`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from localcluster.api.types import ResourceInfo
from localcluster.http import tables

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)
CREATED = "2026-01-02T11:55:00Z"  # five minutes before NOW

POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True)
SERVICE = ResourceInfo("", "v1", "Service", "services", "service", True)
DEPLOYMENT = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True)
CONFIGMAP = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True)
SECRET = ResourceInfo("", "v1", "Secret", "secrets", "secret", True)
NAMESPACE = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False)
NODE = ResourceInfo("", "v1", "Node", "nodes", "node", False)
EVENT = ResourceInfo("", "v1", "Event", "events", "event", True)
CRD = ResourceInfo(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition",
    "customresourcedefinitions", "customresourcedefinition", False,
)  # fmt: skip


def custom(columns: list[dict] | None) -> ResourceInfo:
    version: dict = {"name": "v1"}
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    return ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True, crd={}, crd_version=version
    )


def meta(name: str = "x", **extra: object) -> dict:
    return {"name": name, "namespace": "default", "creationTimestamp": CREATED, **extra}


def header_and_row(info: ResourceInfo, obj: dict) -> dict[str, object]:
    table = tables.to_table(info, [obj], now=NOW)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(-5, "<invalid>", id="future"),
        pytest.param(-1, "0s", id="clock-skew"),
        pytest.param(5, "5s", id="seconds"),
        pytest.param(119, "119s", id="under-two-minutes"),
        pytest.param(182, "3m2s", id="minutes-seconds"),
        pytest.param(300, "5m", id="whole-minutes"),
        pytest.param(3 * 3600 + 60 * 5, "3h5m", id="hours-minutes"),
        pytest.param(20 * 3600, "20h", id="hours"),
        pytest.param(2 * 86400 + 3 * 3600, "2d3h", id="days-hours"),
        pytest.param(30 * 86400, "30d", id="days"),
        pytest.param(3 * 365 * 86400 + 20 * 86400, "3y20d", id="years-days"),
    ],
)
def test_age_is_rendered_like_kubectl(seconds: int, text: str) -> None:
    assert tables.human_duration(seconds) == text


RUNNING_POD = {
    "metadata": meta("web"),
    "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
    "status": {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
            {
                "name": "b",
                "ready": False,
                "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"finishedAt": "2026-01-02T11:59:00Z"}},
            },
        ],
    },
}


@pytest.mark.parametrize(
    ("info", "obj", "expected"),
    [
        pytest.param(
            POD,
            RUNNING_POD,
            {"Name": "web", "Ready": "1/2", "Status": "CrashLoopBackOff",
             "Restarts": "2 (60s ago)", "Age": "5m", "IP": "127.0.0.1", "Node": "node-1",
             "Nominated Node": "<none>", "Readiness Gates": "<none>"},
            id="pod-crashlooping",
        ),
        pytest.param(
            POD,
            {"metadata": meta("p", deletionTimestamp=CREATED), "spec": {"containers": [{}]},
             "status": {"phase": "Running"}},
            {"Status": "Terminating", "Ready": "0/1", "Restarts": "0"},
            id="pod-terminating",
        ),
        pytest.param(
            POD,
            {"metadata": meta("p"), "spec": {"containers": [{}]},
             "status": {"phase": "Succeeded", "containerStatuses": [
                 {"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}},
            {"Status": "Completed"},
            id="pod-completed",
        ),
        pytest.param(
            SERVICE,
            {"metadata": meta("svc"), "spec": {"type": "NodePort", "clusterIP": "10.0.0.1",
             "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
             "selector": {"app": "web"}}},
            {"Type": "NodePort", "Cluster-IP": "10.0.0.1", "External-IP": "<none>",
             "Port(s)": "80:30080/TCP,53/UDP", "Selector": "app=web"},
            id="service",
        ),
        pytest.param(
            DEPLOYMENT,
            {"metadata": meta("d"), "spec": {"replicas": 3, "selector": {"matchLabels": {"a": "b"}},
             "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
             "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}},
            {"Ready": "2/3", "Up-to-date": 3, "Available": 2, "Containers": "c",
             "Images": "busybox", "Selector": "a=b"},
            id="deployment",
        ),
        pytest.param(
            CONFIGMAP, {"metadata": meta("c"), "data": {"a": "1", "b": "2"}},
            {"Data": 2, "Age": "5m"}, id="configmap",
        ),
        pytest.param(
            SECRET, {"metadata": meta("s"), "type": "kubernetes.io/tls", "data": {"tls.crt": ""}},
            {"Type": "kubernetes.io/tls", "Data": 1}, id="secret",
        ),
        pytest.param(
            NAMESPACE, {"metadata": meta("ns"), "status": {"phase": "Terminating"}},
            {"Status": "Terminating"}, id="namespace",
        ),
        pytest.param(
            NODE,
            {"metadata": meta("n", labels={"node-role.kubernetes.io/control-plane": ""}),
             "status": {"conditions": [{"type": "Ready", "status": "True"}],
                        "nodeInfo": {"kubeletVersion": "v1.32.0"},
                        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}},
            {"Status": "Ready", "Roles": "control-plane", "Version": "v1.32.0",
             "Internal-IP": "127.0.0.1"},
            id="node",
        ),
        pytest.param(
            EVENT,
            {"metadata": meta("e"), "type": "Warning", "reason": "BackOff", "message": "boom",
             "involvedObject": {"kind": "Pod", "name": "web"}, "lastTimestamp": CREATED,
             "count": 4},
            {"Last Seen": "5m", "Type": "Warning", "Reason": "BackOff", "Object": "pod/web",
             "Message": "boom", "Count": 4, "Name": "e"},
            id="event",
        ),
        pytest.param(CRD, {"metadata": meta("widgets.example.com")},
                     {"Name": "widgets.example.com", "Created At": CREATED}, id="crd"),
    ],
)  # fmt: skip
def test_built_in_rows_match_kubectl_columns(
    info: ResourceInfo, obj: dict, expected: dict[str, object]
) -> None:
    row = header_and_row(info, obj)
    assert {k: row[k] for k in expected} == expected


WIDGET = {
    "metadata": meta("w"),
    "spec": {"size": 3, "tags": ["a", "b"]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        pytest.param(None, {"Name": "w", "Age": "5m"}, id="no-columns-gives-age"),
        pytest.param(
            [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
             {"name": "Ready", "type": "string",
              "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
             {"name": "Tag", "type": "string", "jsonPath": ".spec.tags[1]", "priority": 1},
             {"name": "Missing", "type": "string", "jsonPath": ".status.phase"},
             {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
             {"name": "Tags", "type": "string", "jsonPath": ".spec.tags"},
             {"name": "Spec", "type": "string", "jsonPath": ".spec"}],
            {"Name": "w", "Size": 3, "Ready": "True", "Tag": "b", "Missing": None,
             "Created": "5m", "Tags": "[a b]", "Spec": "map[size:3 tags:[a b]]"},
            id="declared-columns",
        ),
    ],
)  # fmt: skip
def test_custom_resources_use_additional_printer_columns(
    columns: list[dict] | None, expected: dict[str, object]
) -> None:
    assert header_and_row(custom(columns), WIDGET) == expected


def test_wide_only_columns_carry_a_priority() -> None:
    table = tables.to_table(custom([{"name": "T", "type": "string", "jsonPath": ".a",
                                     "priority": 1}]), [])  # fmt: skip
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 1]


@pytest.mark.parametrize(
    ("include", "expected_kind"),
    [
        pytest.param("Metadata", "PartialObjectMetadata", id="metadata"),
        pytest.param("Object", "Widget", id="object"),
        pytest.param("None", None, id="none"),
    ],
)
def test_rows_embed_the_object_as_requested(include: str, expected_kind: str | None) -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", **WIDGET}
    table = tables.to_table(
        custom(None), [obj], include_object=include, list_meta={"resourceVersion": "7"}, now=NOW
    )
    assert table["metadata"] == {"resourceVersion": "7"}
    embedded = table["rows"][0].get("object")
    assert (embedded or {}).get("kind") == expected_kind
    if embedded:
        assert embedded["metadata"]["name"] == "w"
