"""When and how the webhook's certificates change. Pure: Secret data and `now` in, new data out.

The in-cluster certificate manager keeps everything in one Secret:

    ca.crt         the current CA certificate          ca.key    its private key
    ca-bundle.crt  every CA the API server must trust: the current one first, then older CAs
                   that are still valid (they may have signed a serving certificate still in use)
    tls.crt        the serving certificate (signed by a CA in the bundle)    tls.key  its key

`plan_rotation` looks at that data at instant `now` and returns the data the Secret should
hold, or `None` when it is fine as it is. Rules, each tested table-driven:

- no usable CA (missing, unparseable, key does not match, not a CA) -> a new CA;
- the CA expires within `ca_renew_before` (400 days of its 5 years) -> a new CA; the old one
  stays in `ca-bundle.crt` until it expires, and the serving certificate it signed keeps being
  served until that needs renewing anyway. So a bundle holding the new CA reaches the webhook
  configurations long before any certificate signed by the new CA is served — a replica still
  holding the previous bundle, or an API server whose informer lags, keeps working;
- the serving certificate is missing, broken, lacks a required SAN, is not signed by a CA in the
  bundle, is not yet valid, or expires within `serving_renew_before` (120 days of its 365) ->
  a new one, signed by the current CA;
- expired CAs leave the bundle.

Generating keys is the only impurity (randomness); nothing here reads the clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from certs import pki

__all__ = [
    "BUNDLE_KEY",
    "CA_CERT_KEY",
    "CA_KEY_KEY",
    "TLS_CERT_KEY",
    "TLS_KEY_KEY",
    "Rotation",
    "RotationPolicy",
    "plan_rotation",
    "service_sans",
]

CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
BUNDLE_KEY = "ca-bundle.crt"
TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"


@dataclass(frozen=True)
class RotationPolicy:
    """Lifetimes and renewal margins. `ca_renew_before` must exceed `serving_days`."""

    ca_days: int = 5 * 365
    ca_renew_before: timedelta = timedelta(days=400)
    serving_days: int = 365
    serving_renew_before: timedelta = timedelta(days=120)
    ca_common_name: str = "trainops-webhook-ca"


@dataclass(frozen=True)
class Rotation:
    """The Secret data to write, and why (for the log and the Event-like message)."""

    data: dict[str, bytes]
    reasons: tuple[str, ...] = field(default=())


def service_sans(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use to reach `service` in `namespace`."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def plan_rotation(
    data: Mapping[str, bytes] | None,
    *,
    sans: Sequence[str],
    now: datetime,
    policy: RotationPolicy | None = None,
) -> Rotation | None:
    """The Secret data to hold at `now`, or `None` when `data` needs no change."""
    policy = policy or RotationPolicy()
    data = dict(data or {})
    reasons: list[str] = []

    previous_cas = _previous_cas(data, now)
    ca, why = _usable_ca(data, now, policy)
    if ca is None:
        reasons.append(why)
        ca = pki.new_ca(policy.ca_common_name, days=policy.ca_days, now=now)
    ca_cert = ca.certificate()
    trusted = _dedupe([ca_cert, *previous_cas])

    serving, why = _usable_serving(data, trusted, sans, now, policy)
    if serving is None:
        reasons.append(why)
        serving = pki.new_serving_cert(ca, sans, days=policy.serving_days, now=now)

    new = {
        CA_CERT_KEY: ca.cert_pem,
        CA_KEY_KEY: ca.key_pem,
        BUNDLE_KEY: b"".join(c.public_bytes(serialization.Encoding.PEM) for c in trusted),
        TLS_CERT_KEY: serving.cert_pem,
        TLS_KEY_KEY: serving.key_pem,
    }
    if all(data.get(k) == v for k, v in new.items()):
        return None
    if not reasons:
        reasons.append("CA bundle updated")
    return Rotation({**data, **new}, tuple(reasons))


def _usable_ca(
    data: Mapping[str, bytes], now: datetime, policy: RotationPolicy
) -> tuple[pki.KeyPair | None, str]:
    cert_pem, key_pem = data.get(CA_CERT_KEY), data.get(CA_KEY_KEY)
    if not cert_pem or not key_pem:
        return None, "no CA yet"
    pair = pki.KeyPair(cert_pem, key_pem)
    try:
        cert = pair.certificate()
        matches = _same_key(cert, pair)
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return None, "stored CA is unreadable"
    if not (matches and is_ca):
        return None, "stored CA key does not match its certificate"
    if cert.not_valid_after_utc - now < policy.ca_renew_before:
        return None, f"CA expires {cert.not_valid_after_utc:%Y-%m-%d}"
    return pair, ""


def _usable_serving(
    data: Mapping[str, bytes],
    trusted: Sequence[x509.Certificate],
    sans: Sequence[str],
    now: datetime,
    policy: RotationPolicy,
) -> tuple[pki.KeyPair | None, str]:
    cert_pem, key_pem = data.get(TLS_CERT_KEY), data.get(TLS_KEY_KEY)
    if not cert_pem or not key_pem:
        return None, "no serving certificate yet"
    pair = pki.KeyPair(cert_pem, key_pem)
    try:
        cert = pair.certificate()
        if not _same_key(cert, pair):
            return None, "serving key does not match its certificate"
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return None, "serving certificate is unreadable or has no SANs"
    have = {e.value if isinstance(e, x509.DNSName) else str(e.value) for e in names}
    wanted = {str(e.value) for e in pki.san_entries(sans)}
    if not wanted <= have:
        return None, f"serving certificate lacks SANs {sorted(wanted - have)}"
    if not any(_issued_by(cert, ca) for ca in trusted):
        return None, "serving certificate is not signed by a trusted CA"
    if cert.not_valid_before_utc > now:
        return None, "serving certificate is not valid yet"
    if cert.not_valid_after_utc - now < policy.serving_renew_before:
        return None, f"serving certificate expires {cert.not_valid_after_utc:%Y-%m-%d}"
    return pair, ""


def _previous_cas(data: Mapping[str, bytes], now: datetime) -> list[x509.Certificate]:
    """CAs from the stored bundle and CA slot that are still valid at `now`."""
    found: list[x509.Certificate] = []
    for key in (CA_CERT_KEY, BUNDLE_KEY):
        pem = data.get(key)
        if not pem:
            continue
        try:
            found.extend(x509.load_pem_x509_certificates(pem))
        except ValueError:
            continue
    return [c for c in found if c.not_valid_after_utc > now]


def _dedupe(certs: Sequence[x509.Certificate]) -> list[x509.Certificate]:
    seen: set[bytes] = set()
    out: list[x509.Certificate] = []
    for cert in certs:
        fp = cert.fingerprint(hashes.SHA256())
        if fp not in seen:
            seen.add(fp)
            out.append(cert)
    return out


def _same_key(cert: x509.Certificate, pair: pki.KeyPair) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == pair.private_key().public_key().public_bytes(
        *fmt
    )


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:
        return False
    return True
