"""Bad input gets a 4xx with a plain message, never a 5xx, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kube.connlimits import ConnectionLimits
from tests.webhook.conftest import Webhook
from tests.webhook.reviews import example, review
from webhook.app import METRICS, Settings
from webhook.server import RunningServer, ServerConfig, start

NOT_A_REVIEW = {
    "not JSON": (b"{not json", "not valid JSON"),
    "not UTF-8": (b"\xff\xfe\x00{", "not valid JSON"),
    "a JSON list": (b"[]", "not a JSON object"),
    "another kind": (b'{"apiVersion": "v1", "kind": "Pod"}', "not an AdmissionReview"),
    "no request": (
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
        "no request",
    ),
    "deeply nested JSON": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("body,expected", NOT_A_REVIEW.values(), ids=NOT_A_REVIEW.keys())
async def test_a_body_that_is_not_an_admission_review_gets_400(
    webhook: Webhook, body: bytes, expected: str
) -> None:
    status, text = await webhook.post("/validate", body)
    assert status == 400
    assert isinstance(text, str) and expected in text
    await _still_serving(webhook)


BROKEN_REQUESTS = {
    "no uid": (lambda r: r["request"].pop("uid"), "request.uid"),
    "unknown operation": (lambda r: r["request"].__setitem__("operation", "PATCH"), "operation"),
    "create without object": (lambda r: r["request"].__setitem__("object", None), "request.object"),
    "update without old object": (
        lambda r: r["request"].__setitem__("operation", "UPDATE"),
        "request.oldObject",
    ),
}


@pytest.mark.parametrize("breaks,expected", BROKEN_REQUESTS.values(), ids=BROKEN_REQUESTS.keys())
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
async def test_a_review_missing_what_the_api_server_always_sends_gets_400(
    webhook: Webhook, path: str, breaks, expected: str
) -> None:
    sent = review(example("tensorflow-mnist"))
    breaks(sent)
    status, text = await webhook.post(path, sent)
    assert status == 400
    assert isinstance(text, str) and expected in text


async def test_an_object_nested_deeply_but_parseable_is_answered_without_a_5xx(
    webhook: Webhook,
) -> None:
    sent = review(example("tensorflow-mnist"))
    deep: object = "leaf"
    for _ in range(900):
        deep = [deep]
    template = sent["request"]["object"]["spec"]["replicaSpecs"][0]["template"]
    template["metadata"] = {"labels": deep}
    body = json.dumps(sent).encode()
    for path in ("/mutate", "/validate"):
        status, _ = await webhook.post(path, body)
        assert status in (200, 400)
    await _still_serving(webhook)


def _counted(server: RunningServer) -> dict[str, float]:
    """The webhook's request counters by verdict, and its latency observations as `observed`."""
    text = generate_latest(server.app[METRICS].registry).decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "trainops_webhook_requests_total":
                verdict = sample.labels["verdict"]
                out[verdict] = out.get(verdict, 0.0) + sample.value
            elif sample.name == "trainops_webhook_request_duration_seconds_count":
                out["observed"] = out.get("observed", 0.0) + sample.value
    return out


async def test_a_body_over_the_limit_gets_413(webhook: Webhook) -> None:
    limit = Settings().max_body_bytes
    status, text = await webhook.post("/validate", b" " * (limit + 1))
    assert status == 413
    assert str(limit) in str(text)
    assert _counted(webhook.server) == {"too_large": 1.0, "observed": 1.0}
    await _still_serving(webhook)


def _update_of_size(object_bytes: int) -> bytes:
    old, _ = __import__("policies").default(example("tensorflow-mnist"))
    old["metadata"]["annotations"] = {"bulk": "x" * (object_bytes - 4096)}
    return json.dumps(review(old, operation="UPDATE", old=old)).encode()


async def test_an_update_carrying_two_objects_of_etcds_largest_size_fits_the_limit(
    webhook: Webhook,
) -> None:
    """etcd stores objects of at most 1.5 MiB, so an UPDATE of a job that can exist carries at
    most two such objects: 3 MiB, the API server's own request limit, plus the envelope."""
    body = _update_of_size(1536 * 1024)
    assert 3_000_000 < len(body) <= Settings().max_body_bytes
    status, answer = await webhook.post("/validate", body)
    assert status == 200 and isinstance(answer, dict)
    assert "response" in answer


async def test_an_update_carrying_two_objects_larger_than_etcd_stores_gets_413(
    webhook: Webhook,
) -> None:
    body = _update_of_size(2 * 1024 * 1024)
    status, text = await webhook.post("/validate", body)
    assert status == 413
    assert str(Settings().max_body_bytes) in str(text)


async def test_a_get_on_an_admission_endpoint_is_refused_with_405(webhook: Webhook) -> None:
    async with webhook.session.get(webhook.url + "/validate") as resp:
        assert resp.status == 405
        assert resp.headers["Allow"] == "POST"


async def test_routes_answer_as_a_router_would_another_path_404_head_like_get(
    webhook: Webhook,
) -> None:
    async with webhook.session.post(webhook.url + "/validate/extra", data=b"{}") as resp:
        assert resp.status == 404
    async with webhook.session.head(webhook.url + "/healthz") as resp:
        assert resp.status == 200
    async with webhook.session.post(webhook.url + "/healthz", data=b"") as resp:
        assert resp.status == 405
        assert resp.headers["Allow"] == "GET,HEAD"


# --- slow clients -------------------------------------------------------------------------

SLOW = Settings(body_timeout=0.3, linger_timeout=0.3)
STRICT = ConnectionLimits(handshake_timeout=0.5, header_timeout=0.5, idle_timeout=0.5)


@pytest.fixture
async def strict_server(cert_dir: Path) -> AsyncIterator[RunningServer]:
    config = ServerConfig(cert_dir=cert_dir, host="127.0.0.1", port=0, settings=SLOW, limits=STRICT)
    server = await start(config)
    yield server
    await server.close()


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends before it closes (bounded by a generous deadline)."""
    async with asyncio.timeout(10):
        return await reader.read()


async def _tls_connect(server: RunningServer, ctx: ssl.SSLContext):
    return await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=ctx, server_hostname="localhost"
    )


async def _send_part_of_a_body(server: RunningServer, ctx: ssl.SSLContext):
    """A connection that announced a 1000-byte body and sent 13 bytes of it."""
    reader, writer = await _tls_connect(server, ctx)
    writer.write(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"apiVersion"'
    )
    await writer.drain()
    return reader, writer


async def test_a_client_that_never_finishes_its_headers_is_disconnected(
    strict_server: RunningServer, client_context: ssl.SSLContext
) -> None:
    reader, writer = await _tls_connect(strict_server, client_context)
    writer.write(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-")
    await writer.drain()
    assert await _read_until_closed(reader) == b""
    writer.close()


async def test_a_client_that_trickles_its_body_gets_408(
    strict_server: RunningServer, client_context: ssl.SSLContext
) -> None:
    reader, writer = await _send_part_of_a_body(strict_server, client_context)
    answer = await _read_until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"not received within 0.3s" in answer
    writer.close()
    assert _counted(strict_server) == {"timeout": 1.0, "observed": 1.0}


async def test_a_client_that_leaves_mid_body_is_counted_and_timed_without_an_error_logged(
    strict_server: RunningServer, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        _, writer = await _send_part_of_a_body(strict_server, client_context)
        writer.transport.abort()
        async with asyncio.timeout(5):
            while _counted(strict_server).get("observed") != 1.0:
                await asyncio.sleep(0.02)
    assert _counted(strict_server) == {"client_gone": 1.0, "observed": 1.0}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_client_that_never_starts_tls_is_disconnected(strict_server: RunningServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", strict_server.port)
    assert await _read_until_closed(reader) == b""
    writer.close()


async def _still_serving(webhook: Webhook) -> None:
    status, body = await webhook.post("/validate", review(example("tensorflow-mnist")))
    assert status == 200 and isinstance(body, dict)


async def test_a_chunked_body_over_the_limit_gets_413_even_when_it_arrived_whole(
    cert_dir: Path, client_context: ssl.SSLContext
) -> None:
    # No Content-Length: the size is known only once the body is in; sent in one write, it is
    # usually whole in aiohttp's buffer when the handler starts (taken without a read loop).
    settings = Settings(max_body_bytes=1000)
    server = await start(
        ServerConfig(cert_dir=cert_dir, host="127.0.0.1", port=0, settings=settings)
    )
    try:
        reader, writer = await _tls_connect(server, client_context)
        chunk = b"x" * 1500
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
            + f"{len(chunk):x}\r\n".encode()
            + chunk
            + b"\r\n0\r\n\r\n"
        )
        await writer.drain()
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b"larger than the limit of 1000 bytes" in answer
        assert _counted(server) == {"too_large": 1.0, "observed": 1.0}
    finally:
        await server.close()


async def test_a_request_line_too_long_is_one_warning_line_not_a_traceback(
    webhook: Webhook, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="aiohttp.server"):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", webhook.server.port, ssl=client_context
        )
        writer.write(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        answer = await _read_until_closed(reader)
        writer.close()
    assert answer.split(b" ", 2)[1] == b"400"  # (aiohttp answers an unparsed request in HTTP/1.0)
    (record,) = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None and record.exc_text is None
    assert "LineTooLong" in record.getMessage() and "8190 bytes" in record.getMessage()
    await _still_serving(webhook)
