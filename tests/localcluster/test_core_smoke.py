"""The shared fixture serves a working cluster: discovery, namespaces, a configmap round trip."""

from __future__ import annotations

from kubernetes import client

from tests.support.cluster import Cluster


def test_default_namespaces_exist_with_their_name_label(cluster: Cluster) -> None:
    with cluster.api_client() as api:
        names = {ns.metadata.name: ns for ns in client.CoreV1Api(api).list_namespace().items}
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert names[name].metadata.labels["kubernetes.io/metadata.name"] == name
        assert names[name].status.phase == "Active"


def test_a_configmap_created_in_a_test_namespace_reads_back(
    cluster: Cluster, namespace: str
) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        created = core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "settings"}, "data": {"a": "1"}}
        )
        read = core.read_namespaced_config_map("settings", namespace)
    assert read.data == {"a": "1"}
    assert read.metadata.uid == created.metadata.uid
    assert int(read.metadata.resource_version) > 0
