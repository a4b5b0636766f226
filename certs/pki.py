"""A tiny PKI: one CA and serving (and client) certificates signed by it, as PEM bytes.

Everything that needs TLS in trainops (the webhook, the embedded API server, tests) gets its
certificates from here, so there is one place that decides key type (ECDSA P-256: small, fast
handshakes, accepted by Go's crypto/tls), validity, and Subject Alternative Names. Go clients
ignore the Common Name, so a serving certificate always carries SANs; `localhost` and
`127.0.0.1` are always included so a loopback test or a port-forward works with any bundle.

Functions take `now` instead of reading the clock, so rotation planning can be tested with a
table of instants.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_FILE",
    "CERT_FILE",
    "KEY_FILE",
    "MAX_DAYS",
    "KeyPair",
    "load_keypair",
    "new_ca",
    "new_client_cert",
    "new_serving_cert",
    "not_after",
    "san_entries",
    "san_problem",
    "serial_number",
    "write_bundle",
]

CA_FILE = "ca.crt"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

# Backdate notBefore a little: clocks across nodes are never exactly in step.
_CLOCK_SKEW = timedelta(minutes=5)
_ALWAYS_SANS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM-encoded (the key unencrypted, PKCS#8)."""

    cert_pem: bytes
    key_pem: bytes

    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("expected an EC private key")
        return key

    @property
    def serial(self) -> int:
        return self.certificate().serial_number

    @property
    def not_after(self) -> datetime:
        return not_after(self.cert_pem)


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(
    common_name: str = "trainops-ca", *, days: int = 3650, now: datetime | None = None
) -> KeyPair:
    """A self-signed CA that may sign leaf certificates only (pathLen 0)."""
    start = _now(now)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


MAX_DAYS = 36500
"""A hundred years: far beyond any sensible validity, well within X.509's GeneralizedTime."""

_DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def san_problem(name: str) -> str:
    """Why `name` cannot be a Subject Alternative Name ("" when it can).

    IP addresses (v4 or v6) are fine; anything else must be an ASCII DNS name as RFC 1123 has
    it (labels of letters, digits and inner hyphens, 1-63 characters, 253 in all), optionally
    with a `*` as the whole leftmost label. Catching this here turns a certificate no client
    would ever match into a clear error before anything is written.
    """
    try:
        ipaddress.ip_address(name)
        return ""
    except ValueError:
        pass
    if not name.isascii():
        return "a DNS name must be ASCII; give an internationalised name in its xn-- form"
    if re.fullmatch(r"[0-9.]+", name):
        return "not a valid IPv4 address"
    if "/" in name:
        return "a network (with /) cannot be a certificate name; give one address"
    if len(name) > 253:
        return f"a DNS name is at most 253 characters, not {len(name)}"
    labels = name.split(".")
    if labels[0] == "*" and len(labels) > 1:
        labels = labels[1:]
    for label in labels:
        if not _DNS_LABEL.fullmatch(label):
            return (
                f"{label!r} is not a DNS label (1-63 letters, digits or '-', "
                "starting and ending with a letter or digit)"
            )
    return ""


def san_entries(names: Sequence[str]) -> list[x509.GeneralName]:
    """`localhost`, `127.0.0.1` and `names`, deduplicated; IP-looking names become IP SANs.

    Raises ValueError naming the first name that cannot be a SAN (see `san_problem`).
    """
    out: list[x509.GeneralName] = []
    seen: set[str] = set()
    for raw in (*_ALWAYS_SANS, *names):
        name = raw.strip()
        if not name or name in seen:
            continue
        problem = san_problem(name)
        if problem:
            raise ValueError(f"{name!r}: {problem}")
        seen.add(name)
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def new_serving_cert(
    ca: KeyPair,
    sans: Sequence[str],
    *,
    days: int = 365,
    now: datetime | None = None,
    common_name: str | None = None,
) -> KeyPair:
    """A TLS server certificate for `sans` (plus localhost/127.0.0.1), signed by `ca`.

    The validity never outlasts the CA: a leaf that outlives its issuer is rejected by clients.
    """
    entries = san_entries(sans)
    first_dns = next((e.value for e in entries if isinstance(e, x509.DNSName)), "localhost")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or first_dns)])
    return _leaf(
        ca,
        subject,
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.SubjectAlternativeName(entries)],
        days=days,
        now=now,
    )


def new_client_cert(
    ca: KeyPair,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    days: int = 365,
    now: datetime | None = None,
) -> KeyPair:
    """A TLS client certificate (clientAuth only) for `common_name`, signed by `ca`: what an
    API server presents to kubelets (kube-apiserver's `--kubelet-client-certificate`)."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject = x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return _leaf(ca, subject, ExtendedKeyUsageOID.CLIENT_AUTH, [], days=days, now=now)


def _leaf(
    ca: KeyPair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    extensions: Sequence[x509.ExtensionType],
    *,
    days: int,
    now: datetime | None,
) -> KeyPair:
    """A leaf certificate of `subject` for one extended key `usage`, signed by `ca`, valid for
    `days` but never past the CA."""
    start = _now(now)
    ca_cert = ca.certificate()
    ca_key = ca.private_key()
    key = _new_key()
    end = min(start + timedelta(days=days), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    cert = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
    ).sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so a reader sees the old or the new content, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bundle(out_dir: Path, ca: KeyPair, serving: KeyPair, *, cert_mode: int = 0o644) -> None:
    """Write `ca.crt`, `tls.crt` (mode `cert_mode`) and `tls.key` (mode 0600) into `out_dir`.

    The key is written before the certificate: a watcher that reacts to `tls.crt` changing then
    finds the matching key already in place.
    """
    out_dir = Path(out_dir)
    atomic_write(out_dir / CA_FILE, ca.cert_pem, cert_mode)
    atomic_write(out_dir / KEY_FILE, serving.key_pem, 0o600)
    atomic_write(out_dir / CERT_FILE, serving.cert_pem, cert_mode)


def load_keypair(cert_path: Path, key_path: Path) -> KeyPair:
    """Read and check a PEM pair; raises `ValueError` naming the file that is unusable."""
    cert_pem = Path(cert_path).read_bytes()
    key_pem = Path(key_path).read_bytes()
    try:
        x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise ValueError(f"{cert_path}: not a PEM certificate ({exc})") from None
    try:
        serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{key_path}: not an unencrypted PEM private key ({exc})") from None
    return KeyPair(cert_pem, key_pem)


def not_after(cert_pem: bytes) -> datetime:
    """The expiry (timezone-aware UTC) of the first certificate in `cert_pem`."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def serial_number(cert_pem: bytes) -> int:
    return x509.load_pem_x509_certificate(cert_pem).serial_number
