"""The root-CA publisher: every namespace has `kube-root-ca.crt` with the cluster CA, put back
when deleted or changed (as kube-controller-manager's root-ca-cert-publisher does; these tests
run on the reference too, whose controller manager runs it)."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.controllers import rootca
from tests.localcluster._http import Http
from tests.support.cluster import Cluster, eventually

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
DESCRIBED = {rootca.DESCRIPTION_ANNOTATION: rootca.DESCRIPTION}


def _cm(data: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": rootca.ROOT_CA_NAME, "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


DESIRED_CASES = {
    "missing: created with the CA and the description": (
        None,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": rootca.ROOT_CA_NAME, "annotations": DESCRIBED},
            "data": {"ca.crt": CA},
        },
    ),
    "as published: nothing to write": (_cm({"ca.crt": CA}, DESCRIBED), None),
    "other annotations and labels kept: nothing to write": (
        _cm({"ca.crt": CA}, {**DESCRIBED, "team": "x"}),
        None,
    ),
    "changed CA: data put back": (
        _cm({"ca.crt": "old"}, DESCRIBED),
        _cm({"ca.crt": CA}, DESCRIBED),
    ),
    "extra key: data replaced whole": (
        _cm({"ca.crt": CA, "more": "1"}, DESCRIBED),
        _cm({"ca.crt": CA}, DESCRIBED),
    ),
    "description removed: put back beside the others": (
        _cm({"ca.crt": CA}, {"team": "x"}),
        _cm({"ca.crt": CA}, {"team": "x", **DESCRIBED}),
    ),
    "no annotations at all: the description added": (
        _cm({"ca.crt": CA}),
        _cm({"ca.crt": CA}, DESCRIBED),
    ),
}


@pytest.mark.parametrize(("current", "expected"), DESIRED_CASES.values(), ids=DESIRED_CASES)
def test_desired_config_map(current: dict[str, Any] | None, expected: Any) -> None:
    assert rootca.desired(current, CA) == expected


def _path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{rootca.ROOT_CA_NAME}"


def _published(http: Http, namespace: str) -> dict[str, Any]:
    """The namespace's kube-root-ca.crt (AssertionError while there is none: `eventually`
    retries)."""
    reply = http.get(_path(namespace))
    assert reply.status == 200, reply.status
    return dict(reply.json())


def test_a_new_namespace_gets_the_cluster_ca(http: Http, cluster: Cluster, namespace: str) -> None:
    cm = eventually(lambda: _published(http, namespace))
    assert cm["data"] == {"ca.crt": cluster.ca_file.read_text()}
    assert cm["metadata"]["annotations"][rootca.DESCRIPTION_ANNOTATION] == rootca.DESCRIPTION


def test_a_deleted_root_ca_config_map_comes_back(http: Http, namespace: str) -> None:
    first = eventually(lambda: _published(http, namespace))
    assert http.delete(_path(namespace)).status == 200

    def recreated() -> dict[str, Any]:
        cm = _published(http, namespace)
        assert cm["metadata"]["uid"] != first["metadata"]["uid"]
        return cm

    again = eventually(recreated)
    assert again["data"] == first["data"]


def test_a_changed_root_ca_config_map_is_put_back(
    http: Http, cluster: Cluster, namespace: str
) -> None:
    eventually(lambda: _published(http, namespace))
    changed = http.patch(
        _path(namespace),
        {"metadata": {"labels": {"kept": "yes"}}, "data": {"ca.crt": "tampered", "extra": "1"}},
        content_type="application/merge-patch+json",
    )
    assert changed.status == 200

    def restored() -> dict[str, Any]:
        cm = _published(http, namespace)
        assert cm["data"] == {"ca.crt": cluster.ca_file.read_text()}
        return cm

    cm = eventually(restored)
    assert cm["metadata"]["labels"] == {"kept": "yes"}
