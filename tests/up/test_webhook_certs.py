"""`trainops up` reuses the webhook certificates of an earlier run only when they still work;
a damaged file means new certificates, not a failed start ("no PEM certificate found")."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from certs import pki
from trainops.commands.up_cluster import usable_webhook_certs as _usable_webhook_certs

NOW = datetime.now(UTC)


def _bundle(directory: Path, days: int = 365) -> Path:
    ca = pki.new_ca("test-ca")
    pki.write_bundle(directory, ca, pki.new_serving_cert(ca, [], days=days))
    return directory


def _garbage_ca(d: Path, other: Path) -> None:
    (d / pki.CA_FILE).write_text("garbage\n")


def _another_ca(d: Path, other: Path) -> None:
    shutil.copy(_bundle(other) / pki.CA_FILE, d / pki.CA_FILE)


def _another_key(d: Path, other: Path) -> None:
    shutil.copy(_bundle(other) / pki.KEY_FILE, d / pki.KEY_FILE)


def _truncated_cert(d: Path, other: Path) -> None:
    (d / pki.CERT_FILE).write_bytes((d / pki.CERT_FILE).read_bytes()[:100])


def _missing_key(d: Path, other: Path) -> None:
    (d / pki.KEY_FILE).unlink()


DAMAGE: dict[str, Callable[[Path, Path], None]] = {
    "a CA file that is not PEM": _garbage_ca,
    "a CA that did not sign the serving certificate": _another_ca,
    "a key of another certificate": _another_key,
    "a truncated serving certificate": _truncated_cert,
    "a missing key": _missing_key,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=list(DAMAGE))
def test_damaged_certificates_are_not_reused(
    tmp_path: Path, damage: Callable[[Path, Path], None]
) -> None:
    d = _bundle(tmp_path / "webhook")
    damage(d, tmp_path / "other")
    assert not _usable_webhook_certs(d / pki.CA_FILE, d / pki.CERT_FILE, d / pki.KEY_FILE, NOW)


def test_a_sound_bundle_is_reused_until_30_days_before_it_expires(tmp_path: Path) -> None:
    d = _bundle(tmp_path / "webhook", days=40)
    files = (d / pki.CA_FILE, d / pki.CERT_FILE, d / pki.KEY_FILE)
    assert _usable_webhook_certs(*files, NOW)
    assert not _usable_webhook_certs(*files, NOW + timedelta(days=11))


def test_a_bundle_that_does_not_name_the_webhook_url_host_is_not_reused(tmp_path: Path) -> None:
    """`--webhook-url https://HOST:PORT`: the API server checks the certificate names HOST."""
    d = _bundle(tmp_path / "webhook")
    files = (d / pki.CA_FILE, d / pki.CERT_FILE, d / pki.KEY_FILE)
    assert _usable_webhook_certs(*files, NOW, sans=["localhost", "127.0.0.1"])
    assert not _usable_webhook_certs(*files, NOW, sans=["127.0.0.1", "10.1.2.3"])
    assert not _usable_webhook_certs(*files, NOW, sans=["trainer.example.com"])
