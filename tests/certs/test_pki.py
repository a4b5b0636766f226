"""The PKI: what a serving certificate carries, and that the bundle is written safely."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import pki

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def ca() -> pki.KeyPair:
    return pki.new_ca(now=NOW)


def test_a_serving_cert_always_names_localhost_and_loopback(ca: pki.KeyPair) -> None:
    leaf = pki.new_serving_cert(ca, ["svc.ns.svc", "10.0.0.7", "::1"], now=NOW).certificate()
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "svc.ns.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.0.0.7"),
        ipaddress.ip_address("::1"),
    ]


def test_a_serving_cert_is_a_p256_server_leaf_signed_by_the_ca(ca: pki.KeyPair) -> None:
    leaf = pki.new_serving_cert(ca, [], now=NOW).certificate()
    key = leaf.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    leaf.verify_directly_issued_by(ca.certificate())


def test_a_serving_cert_never_outlives_its_ca() -> None:
    short_ca = pki.new_ca(days=10, now=NOW)
    leaf = pki.new_serving_cert(short_ca, [], days=365, now=NOW)
    assert leaf.not_after == short_ca.not_after == NOW + timedelta(days=10)


def test_the_bundle_is_written_with_a_private_key_and_loads_into_ssl(
    ca: pki.KeyPair, tmp_path
) -> None:
    serving = pki.new_serving_cert(ca, ["x"], now=datetime.now(UTC))
    pki.write_bundle(tmp_path, ca, serving)
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    loaded = pki.load_keypair(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert loaded == serving
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")


def test_loading_a_broken_pair_names_the_file(tmp_path) -> None:
    (tmp_path / "tls.crt").write_text("not a cert")
    (tmp_path / "tls.key").write_text("nope")
    with pytest.raises(ValueError, match=r"tls\.crt"):
        pki.load_keypair(tmp_path / "tls.crt", tmp_path / "tls.key")
