"""One table of cluster-scoped kinds, overridden by what discovery says (`gitops.engine.kinds`):
pairing, the desired keys and tenancy judge a kind's scope the same way."""

from __future__ import annotations

import pytest

from gitops.engine import kinds, tenancy
from gitops.engine.entries import entries_from_text
from gitops.engine.keys import desired_keys
from gitops.engine.pairing import key_of
from gitops.engine.preflight import preflight

CRD_KIND = ("example.com/v1", "Widget")


@pytest.mark.parametrize(
    ("scopes", "group_kind", "cluster_scoped"),
    [
        pytest.param({}, ("", "Namespace"), True, id="built-in table: Namespace"),
        pytest.param({}, ("storage.k8s.io", "CSINode"), True, id="built-in table: CSINode"),
        pytest.param({}, ("", "ComponentStatus"), True, id="built-in table: ComponentStatus"),
        pytest.param({}, ("", "ConfigMap"), False, id="unknown to the table: namespaced"),
        pytest.param({CRD_KIND: False}, ("example.com", "Widget"), True, id="discovery: cluster"),
        pytest.param(
            {CRD_KIND: True}, ("example.com", "Widget"), False, id="discovery: namespaced"
        ),
        pytest.param(
            {("v1", "Namespace"): True},
            ("", "Namespace"),
            False,
            id="discovery overrules the table",
        ),
    ],
)
def test_a_kinds_scope_is_discoverys_word_then_the_tables(
    scopes: dict[tuple[str, str], bool], group_kind: tuple[str, str], cluster_scoped: bool
) -> None:
    assert (group_kind in kinds.cluster_scoped(scopes)) is cluster_scoped


def test_pairing_and_tenancy_share_one_table() -> None:
    for group, kind in kinds.CLUSTER_SCOPED:
        api_version = f"{group}/v1" if group else "v1"
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
        assert key_of(obj, "team-a").namespace == ""
        violation = tenancy.check_object(
            obj,
            repository_namespace="team-a",
            destination="team-a",
            namespaced=None,
            boundaries=tenancy.Boundaries(),
        )
        assert violation is not None and "is cluster-scoped" in violation.message, kind


def test_a_cluster_scoped_custom_resource_is_keyed_without_a_namespace() -> None:
    text = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    checked = preflight(entries_from_text("w.yaml", text))
    (namespaced,) = desired_keys(checked, "team-a")
    assert namespaced.namespace == "team-a"
    (cluster,) = desired_keys(checked, "team-a", kinds.cluster_scoped({CRD_KIND: False}))
    assert cluster.namespace == ""
