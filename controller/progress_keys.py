"""The progress endpoint's secrets: its CA, serving certificate and token key, in one Secret.

Why a Secret: every replica of the controller must serve with a certificate the pods trust and
check tokens it did not mint itself (a standby that becomes leader keeps validating the tokens
of pods created before), so the CA, the serving pair and the HMAC key are shared, in the Secret
`trainops-controller-progress` of the controller's namespace. The first replica to start
creates it; a second one racing it gets AlreadyExists and reads the winner's. A serving
certificate that no longer names the advertised host, or that expires within 30 days, is
issued again by the same CA (pods keep trusting it: they were given the CA), written back
conditionally on the resourceVersion read (a Conflict: read again and use the winner's).

Secret data: `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, `token.key` (32 random bytes), and what
the serving certificate names and when it expires (`tls.host`, `tls.not-after`), so that an
ordinary start reads plain fields: `cryptography` (~11 MiB of the controller's RSS) is
imported only to issue. The CA lives ten years; nothing rotates it (docs/PROGRESS.md says how
to: delete the Secret and the running jobs' pods get new values when they are next created).
"""

from __future__ import annotations

import base64
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kube import errors, resources
from kube.client import Client

if TYPE_CHECKING:
    from certs import pki

__all__ = ["ProgressKeys", "ensure_keys", "issue", "needs_new_serving"]

log = logging.getLogger(__name__)

RENEW_BEFORE = timedelta(days=30)
_ATTEMPTS = 5


@dataclass(frozen=True)
class ProgressKeys:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    token_key: bytes


def issue(host: str, now: datetime, ca: pki.KeyPair | None = None) -> dict[str, bytes]:
    """New Secret data for `host` (a new CA unless `ca` is given; no token key)."""
    from certs import pki

    ca = ca or pki.new_ca("trainops-controller-progress-ca", now=now)
    serving = pki.new_serving_cert(ca, [host], now=now)
    return {
        "ca.crt": ca.cert_pem,
        "ca.key": ca.key_pem,
        "tls.crt": serving.cert_pem,
        "tls.key": serving.key_pem,
        "tls.host": host.encode(),
        "tls.not-after": serving.not_after.strftime("%Y-%m-%dT%H:%M:%SZ").encode(),
    }


def needs_new_serving(data: dict[str, bytes], host: str, now: datetime) -> bool:
    """Whether the stored serving certificate was not issued for `host` or expires within
    `RENEW_BEFORE` (pure; from the fields written beside it)."""
    try:
        issued_for = data["tls.host"].decode()
        expires = datetime.fromisoformat(data["tls.not-after"].decode().replace("Z", "+00:00"))
    except (KeyError, ValueError, UnicodeDecodeError):
        return True
    return issued_for != host or expires - now < RENEW_BEFORE


def _complete(data: dict[str, bytes]) -> bool:
    return all(k in data for k in ("ca.crt", "ca.key", "tls.crt", "tls.key", "token.key"))


def _pair(cert: bytes, key: bytes) -> pki.KeyPair:
    from certs import pki

    return pki.KeyPair(cert, key)


async def ensure_keys(client: Client, namespace: str, name: str, host: str) -> ProgressKeys:
    """Read (or create, or complete) the Secret; the keys every replica serves with."""
    for _ in range(_ATTEMPTS):
        now = datetime.now(UTC)
        try:
            secret = await client.get(resources.SECRETS, name, namespace)
        except errors.NotFound:
            data = {**issue(host, now), "token.key": os.urandom(32)}
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "trainops"},
                },
                "type": "Opaque",
                "data": _encode(data),
            }
            try:
                await client.create(resources.SECRETS, body, namespace)
            except errors.AlreadyExists:
                continue  # another replica won: use its values
            log.info(
                "progress: created Secret %s/%s (CA, serving certificate, token key)",
                namespace,
                name,
            )
            return _keys(data)
        data = _decode(secret.get("data"))
        if _complete(data) and not needs_new_serving(data, host, now):
            return _keys(data)
        if not _complete(data) or "ca.key" not in data:
            fresh = {**issue(host, now), "token.key": data.get("token.key") or os.urandom(32)}
        else:
            ca = _pair(data["ca.crt"], data["ca.key"])
            fresh = {**issue(host, now, ca), "token.key": data["token.key"]}
        secret["data"] = _encode(fresh)
        try:
            await client.replace(resources.SECRETS, secret, namespace)
        except errors.Conflict:
            continue
        log.info(
            "progress: issued a serving certificate for %s in Secret %s/%s", host, namespace, name
        )
        return _keys(fresh)
    raise errors.Conflict(409, "Conflict", f"Secret {namespace}/{name} kept changing", {})


def _keys(data: dict[str, bytes]) -> ProgressKeys:
    return ProgressKeys(data["ca.crt"], data["tls.crt"], data["tls.key"], data["token.key"])


def _decode(data: Any) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (data or {}).items():
        try:
            out[str(key)] = base64.b64decode(value)
        except (ValueError, TypeError):
            continue
    return out


def _encode(data: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items()}
