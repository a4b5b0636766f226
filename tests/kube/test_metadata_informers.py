"""Metadata-only reads and informers (issue #31 item 2): the client asks for
`PartialObjectMetadata`, and the Manager starts a metadata-only informer on demand, shares it
between holders, and stops and drops it when the last holder releases it."""

from __future__ import annotations

from typing import Any

from kube import Client, LeaderElection, Manager, resources
from tests.support.cluster import aeventually

ALONE = LeaderElection(enabled=False)


def _cm(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"big": "x" * 1000},
    }


async def test_a_metadata_only_list_and_watch_carry_no_data(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, _cm("a", namespace, team="red"))
    listed = await client.list(
        resources.CONFIGMAPS, namespace, field_selector="metadata.name=a", metadata_only=True
    )
    assert listed["kind"] == "PartialObjectMetadataList"
    (item,) = listed["items"]
    assert item["kind"] == "PartialObjectMetadata" and "data" not in item
    assert item["metadata"]["labels"] == {"team": "red"}
    rv = listed["metadata"]["resourceVersion"]

    await client.patch(resources.CONFIGMAPS, "a", {"metadata": {"labels": {"team": "blue"}}},
                       namespace)  # fmt: skip
    events = client.watch(
        resources.CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=5,
        field_selector="metadata.name=a", metadata_only=True,
    )  # fmt: skip
    async for kind, obj in events:
        if kind == "BOOKMARK":
            continue
        assert kind == "MODIFIED"
        assert obj["kind"] == "PartialObjectMetadata" and "data" not in obj
        assert obj["metadata"]["labels"] == {"team": "blue"}
        break
    await events.aclose()


async def test_a_metadata_informer_is_shared_then_stopped_and_dropped_by_its_last_holder(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, _cm("a", namespace, team="red"))
    manager = Manager(client, leader_election=ALONE)
    manager.start()
    try:
        one = manager.acquire_metadata(resources.CONFIGMAPS, namespace)
        assert manager.acquire_metadata(resources.CONFIGMAPS, namespace) is one
        assert manager.acquire_metadata(resources.CONFIGMAPS) is not one  # every namespace
        assert manager.informers() == []  # on demand: not readiness
        assert manager.problems() == {}
        assert await one.wait_synced(timeout=10)
        cached = one.get(namespace, "a")
        assert cached is not None
        assert cached["apiVersion"] == "v1" and cached["kind"] == "ConfigMap"
        assert "data" not in cached and cached["metadata"]["labels"] == {"team": "red"}
        assert "managedFields" not in cached["metadata"]

        # The watch keeps it current.
        await client.create(resources.CONFIGMAPS, _cm("b", namespace, team="blue"))
        await aeventually(lambda: one.get(namespace, "b") is not None, timeout=10)

        name = f"informer/{one.name}"
        await manager.release_metadata(resources.CONFIGMAPS, namespace)
        assert manager.supervisor.running(name)
        await manager.release_metadata(resources.CONFIGMAPS, namespace)
        assert not manager.supervisor.running(name)
        assert [i.namespace for i in manager.metadata_informers()] == [None]

        # Asked again, it is a new cache that lists again.
        again = manager.acquire_metadata(resources.CONFIGMAPS, namespace)
        assert again is not one
        assert await again.wait_synced(timeout=10)
        assert again.get(namespace, "b") is not None
    finally:
        await manager.stop()
