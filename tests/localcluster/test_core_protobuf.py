"""Protobuf request bodies (kubectl's typed `create` generators) decode to the JSON objects."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from localcluster.api.types import ApiError
from localcluster.http import protobuf
from tests.support.cluster import Cluster

KUBECTL = shutil.which("kubectl")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return (
        protobuf.MAGIC
        + _field(1, type_meta)
        + _field(2, raw)
        + _field(4, "application/vnd.kubernetes.protobuf")
    )


def test_a_configmap_message_decodes_with_empty_fields_dropped() -> None:
    meta = (
        _field(1, "cfg")
        + _field(2, "")
        + _field(11, _field(1, "app") + _field(2, "web"))
        + _field(8, b"")
    )
    body = (
        _field(1, meta) + _field(2, _field(1, "a") + _field(2, "1")) + _field(2, _field(1, "empty"))
    )
    assert protobuf.decode(_envelope("v1", "ConfigMap", body)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"app": "web"}},
        "data": {"a": "1", "empty": ""},
    }


def test_int_or_string_quantities_and_meaningful_zeros_decode_as_json() -> None:
    rolling = _field(1, _field(1, 1) + _field(3, "25%")) + _field(2, _field(1, 0) + _field(2, 2))
    spec = _field(1, 0) + _field(4, _field(1, "RollingUpdate") + _field(2, rolling)) + _field(5, 0)
    decoded = protobuf.decode(_envelope("apps/v1", "Deployment", _field(2, spec)))
    assert decoded["spec"] == {
        "replicas": 0,
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2},
        },
    }


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not protobuf", 400),
        (protobuf.MAGIC + b"\x0a\xff", 400),
        (protobuf.MAGIC + _field(1, _field(1, "batch/v1") + _field(2, "Job")), 415),
    ],
    ids=["no magic", "truncated", "unknown kind"],
)
def test_unreadable_bodies_are_client_errors(body: bytes, code: int) -> None:
    with pytest.raises(ApiError) as info:
        protobuf.decode(body)
    assert info.value.code == code


@pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")
def test_kubectl_create_generators_work(cluster: Cluster, namespace: str) -> None:
    def kubectl(*args: str) -> str:
        out = subprocess.run(
            [KUBECTL or "kubectl", "-n", namespace, *args],
            env=cluster.kubectl_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    kubectl("create", "configmap", "cfg", "--from-literal=a=1")
    kubectl("create", "secret", "generic", "sec", "--from-literal=k=v")
    kubectl("create", "serviceaccount", "robot")
    kubectl("create", "deployment", "web", "--image=nginx:1.25", "--replicas=2")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    assert json.loads(kubectl("get", "configmap", "cfg", "-o", "json"))["data"] == {"a": "1"}
    secret = json.loads(kubectl("get", "secret", "sec", "-o", "json"))
    assert (secret["data"], secret["type"]) == ({"k": "dg=="}, "Opaque")
    deployment = json.loads(kubectl("get", "deployment", "web", "-o", "json"))
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert "stdin" not in deployment["spec"]["template"]["spec"]["containers"][0]
    service = json.loads(kubectl("get", "service", "web", "-o", "json"))
    assert service["spec"]["ports"] == [
        {"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}
    ]
