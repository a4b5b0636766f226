"""A body nested deeper than Python can walk is the client's error (400), never a 500 with a
traceback in the server's log: JSON and YAML creates and merge patches (found by a new-user
attack pass on `trainops up`)."""

from __future__ import annotations

import logging

import pytest

from tests.localcluster._http import Http
from tests.support.cluster import Cluster

pytestmark = pytest.mark.embedded_only("about the embedded API server's own decoding")

DEEP = 5000


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", '{"a":' * DEEP + "1" + "}" * DEEP),
        ("application/yaml", "a: " + "[" * 3000 + "]" * 3000 + "\n"),
        ("application/json", '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},'
         '"data":{"x":"y"},"extra":' + "[" * 900 + "]" * 900 + "}"),
    ],
    ids=["json", "yaml", "json-decodable-but-deep"],
)  # fmt: skip
def test_a_deeply_nested_create_is_never_a_500(
    cluster: Cluster, namespace: str, content_type: str, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = Http(cluster).request(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            body.encode(),
            content_type=content_type,
        )
    # 400 when it cannot be decoded; the decodable one is created, its unknown field dropped
    # with a warning, as kube-apiserver does.
    expected = 201 if content_type == "application/json" and '"kind"' in body else 400
    assert response.status == expected, (response.status, response.data[:300])
    assert b"Internal error" not in response.data
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
