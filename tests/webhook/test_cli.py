"""`trainops webhook` starts from the command line, serves over TLS and stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.webhook.reviews import example, review


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, ctx: ssl.SSLContext) -> tuple[int, str]:
    with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
        return resp.status, resp.read().decode()


def test_the_webhook_command_serves_until_sigterm(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    gen = subprocess.run(
        [sys.executable, "-m", "trainops", "certs", "generate", "--out", str(certs)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert gen.returncode == 0, gen.stderr
    port = _free_port()
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
            "--shutdown-delay",
            "0",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    base = f"https://localhost:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _get(base + "/healthz", ctx) == (200, "ok\n")
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "webhook did not start"
                time.sleep(0.1)
        body = json.dumps(review(example("denied/no-main-container"))).encode()
        req = urllib.request.Request(
            base + "/validate", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            answer = json.loads(resp.read())
        assert answer["response"]["allowed"] is False
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


def test_the_webhook_command_explains_missing_certificates(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "webhook", "--cert-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "tls.crt" in result.stderr and "trainops certs generate" in result.stderr


def test_after_sigterm_the_webhook_reports_unready_but_still_serves(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    subprocess.run(
        [sys.executable, "-m", "trainops", "certs", "generate", "--out", str(certs)],
        capture_output=True,
        check=True,
    )
    port = _free_port()
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
            str(port),
            "--shutdown-delay",
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    base = f"https://localhost:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _get(base + "/readyz", ctx) == (200, "ok\n")
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while True:
            try:
                _get(base + "/readyz", ctx)
            except urllib.error.HTTPError as exc:
                assert exc.code == 503 and b"shutdown: terminating" in exc.read()
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _get(base + "/healthz", ctx) == (200, "ok\n")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.communicate(timeout=20)
