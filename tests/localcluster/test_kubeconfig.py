"""Credentials in the data directory: reused across starts, replaced (with a warning naming
the file) when damaged instead of keeping the server from starting."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cryptography import x509

from localcluster.kubeconfig import load_or_create_credentials


def _issued_by(cert_file: Path, ca_file: Path) -> bool:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # wrong issuer or signature
        return False
    return True


def test_credentials_are_reused_across_starts(tmp_path: Path) -> None:
    first = load_or_create_credentials(tmp_path, "127.0.0.1")
    again = load_or_create_credentials(tmp_path, "127.0.0.1")
    assert (again.ca_pem, again.token) == (first.ca_pem, first.token)
    assert _issued_by(again.cert_file, again.ca_file)


@pytest.mark.parametrize(
    ("damaged", "warned"),
    [
        pytest.param("pki/ca.crt", "ca.crt: not a PEM certificate", id="ca-certificate"),
        pytest.param("pki/ca.key", "ca.key: not an unencrypted PEM private key", id="ca-key"),
        pytest.param("pki/tls.crt", "tls.crt: not a PEM certificate", id="serving-certificate"),
    ],
)
def test_damaged_pki_files_are_replaced_with_a_warning_naming_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damaged: str, warned: str
) -> None:
    first = load_or_create_credentials(tmp_path, "127.0.0.1")
    (tmp_path / damaged).write_text("junk\n")
    with caplog.at_level(logging.WARNING, logger="localcluster.kubeconfig"):
        again = load_or_create_credentials(tmp_path, "127.0.0.1")
    assert any(warned in r.getMessage() for r in caplog.records), caplog.text
    assert _issued_by(again.cert_file, again.ca_file)
    assert again.token == first.token


def test_an_empty_token_file_gets_a_new_token(tmp_path: Path) -> None:
    load_or_create_credentials(tmp_path, "127.0.0.1")
    (tmp_path / "token").write_text("\n")
    assert len(load_or_create_credentials(tmp_path, "127.0.0.1").token) > 20
