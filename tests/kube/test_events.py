"""`kube.EventRecorder` against a real API server: Events on an object, repeats aggregated into
`count`, and failures logged instead of raised."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kube import Client, EventRecorder, resources
from tests.support.cluster import aeventually


async def _object(client: Client, namespace: str) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "job", "namespace": namespace},
    }
    return await client.create(resources.CONFIGMAPS, body)


async def _events(client: Client, namespace: str) -> list[dict[str, Any]]:
    return (await client.list(resources.EVENTS, namespace))["items"]


async def test_an_event_names_the_object_and_a_repeat_bumps_its_count(
    client: Client, namespace: str
) -> None:
    obj = await _object(client, namespace)
    recorder = EventRecorder(client, "trainops-controller", host="node-1")
    await recorder.record(obj, "Normal", "Created", "created pod job-worker-0")
    [event] = await _events(client, namespace)
    assert event["metadata"]["name"].startswith("job.")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "job",
        "namespace": namespace,
        "uid": obj["metadata"]["uid"],
        "resourceVersion": obj["metadata"]["resourceVersion"],
    }
    assert event["source"] == {"component": "trainops-controller", "host": "node-1"}
    assert (event["type"], event["reason"], event["count"]) == ("Normal", "Created", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"]

    await recorder.record(obj, "Normal", "Created", "created pod job-worker-0")
    [event] = await _events(client, namespace)
    assert event["count"] == 2

    await recorder.record(obj, "Warning", "Failed", "pod job-worker-0 failed")
    events = await _events(client, namespace)
    assert sorted((e["reason"], e["count"]) for e in events) == [("Created", 2), ("Failed", 1)]


async def test_a_repeat_whose_event_is_gone_creates_a_new_one(
    client: Client, namespace: str
) -> None:
    obj = await _object(client, namespace)
    recorder = EventRecorder(client, "c")
    await recorder.record(obj, "Normal", "Synced", "ok")
    [event] = await _events(client, namespace)
    await client.delete(resources.EVENTS, event["metadata"]["name"], namespace)
    await recorder.record(obj, "Normal", "Synced", "ok")
    [again] = await _events(client, namespace)
    assert again["count"] == 1 and again["metadata"]["name"] != event["metadata"]["name"]


async def test_recording_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    from kube.config import Config

    client = Client.from_config(Config(server="http://127.0.0.1:9"), timeout=1)
    try:
        caplog.set_level(logging.WARNING)
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
        await EventRecorder(client, "c").record(obj, "Warning", "Broken", "x")
        assert any("could not record" in r.getMessage() for r in caplog.records)
    finally:
        await client.close()


async def test_a_full_event_buffer_drops_with_a_warning_and_run_sends_the_rest(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    from kube.events import EventBuffer

    cm = await client.create(
        resources.CONFIGMAPS, {"metadata": {"name": "buffered", "namespace": namespace}}
    )
    buffer = EventBuffer(EventRecorder(client, "test"), size=2)
    caplog.set_level(logging.WARNING)
    for reason in ("One", "Two", "Three"):
        buffer.emit(cm, "Normal", reason, f"event {reason}")
    assert any("dropped Normal Three" in r.getMessage() for r in caplog.records)
    sender = asyncio.create_task(buffer.run())
    try:

        async def sent() -> set[str] | bool:
            body = await client.list(resources.EVENTS, namespace)
            found = {
                e["reason"] for e in body["items"] if e["involvedObject"]["name"] == "buffered"
            }
            return found if found == {"One", "Two"} else False

        await aeventually(sent, timeout=10)
    finally:
        sender.cancel()
