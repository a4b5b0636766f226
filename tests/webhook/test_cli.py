"""`trainops webhook` starts from the command line, serves over TLS and stops on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webhook.reviews import example, review


def _get(url: str, ctx: ssl.SSLContext) -> tuple[int, str]:
    with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
        return resp.status, resp.read().decode()


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    out = tmp_path / "certs"
    gen = subprocess.run(
        [sys.executable, "-m", "trainops", "certs", "generate", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert gen.returncode == 0, gen.stderr
    assert "wrote" in gen.stdout and "SANs: localhost, 127.0.0.1" in gen.stdout
    return out


def _start(certs: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """Start the webhook on port 0 and read the bound port from its start-up log line (which
    also names the event loop: the command serves on uvloop)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainops",
            "webhook",
            "--cert-dir",
            str(certs),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # ends if the process exits before listening
        seen.append(line)
        if m := re.search(r"listening on https://127\.0\.0\.1:(\d+)", line):
            assert "event loop uvloop" in line, line
            return proc, int(m.group(1))
    proc.wait(timeout=10)
    raise AssertionError("webhook did not start:\n" + "".join(seen))


@pytest.fixture
def webhook(certs: Path) -> Iterator[tuple[str, ssl.SSLContext, subprocess.Popen[str]]]:
    proc, port = _start(certs, "--shutdown-delay", "30")
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    try:
        yield f"https://localhost:{port}", ctx, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=20)


def _validate(base: str, ctx: ssl.SSLContext, obj: dict) -> dict:
    req = urllib.request.Request(
        base + "/validate",
        data=json.dumps(review(obj)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
        answer: dict = json.loads(resp.read())["response"]
    return answer


def test_the_webhook_command_serves_and_stops_cleanly_on_sigterm(certs: Path) -> None:
    proc, port = _start(certs, "--shutdown-delay", "0")
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    try:
        assert _get(f"https://localhost:{port}/healthz", ctx) == (200, "ok\n")
        answer = _validate(f"https://localhost:{port}", ctx, example("denied/no-main-container"))
        assert answer["allowed"] is False
        assert "containers" in answer["status"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


def test_check_schema_makes_validate_repeat_the_crd_schema_check(certs: Path, webhook) -> None:
    """By default /validate trusts the API server's schema check; --check-schema repeats it."""
    job = example("tensorflow-mnist")
    job["spec"]["replicaSpecs"][0]["replicass"] = 2  # a typo the CRD schema would refuse
    base, ctx, _ = webhook
    assert _validate(base, ctx, job)["allowed"] is True

    proc, port = _start(certs, "--check-schema", "--shutdown-delay", "0")
    try:
        answer = _validate(f"https://localhost:{port}", ctx, job)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        'spec.replicaSpecs[0]: Forbidden: unknown field "replicass"'
    )


def test_after_sigterm_the_webhook_reports_unready_but_still_serves(webhook) -> None:
    base, ctx, proc = webhook
    assert _get(base + "/readyz", ctx) == (200, "ok\n")
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while True:
        try:
            _get(base + "/readyz", ctx)
        except urllib.error.HTTPError as exc:
            assert exc.code == 503 and b"shutdown: terminating" in exc.read()
            break
        assert time.monotonic() < deadline, "never became unready"
        time.sleep(0.05)
    assert _get(base + "/healthz", ctx) == (200, "ok\n")
    assert proc.poll() is None


def test_the_webhook_command_explains_missing_certificates(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "webhook", "--cert-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "tls.crt" in result.stderr and "trainops certs generate" in result.stderr
