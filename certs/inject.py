"""Putting a CA bundle where the API server looks for it. Pure functions over plain dicts.

The API server trusts a webhook's serving certificate only through the `caBundle` of the
webhook configuration that points at it (and, for CRD conversion webhooks, of the CRD's
`spec.conversion.webhook.clientConfig`). These functions compute the updated object, or `None`
when it already carries the bundle — so callers write only when something changes, and several
replicas injecting the same bundle converge instead of fighting.

Callers write with a full replace that carries the `resourceVersion` they read, so a concurrent
change makes the write fail with 409 and is retried on fresh data, never lost.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from cryptography import x509

__all__ = [
    "ca_bundle_b64",
    "crd_with_ca_bundle",
    "split_pem_bundle",
    "webhook_config_with_ca_bundle",
]


def ca_bundle_b64(pem: bytes) -> str:
    """The `caBundle` field value: base64 of PEM, after checking it holds CA certificates."""
    certs = split_pem_bundle(pem)
    if not certs:
        raise ValueError("no PEM certificate found")
    return base64.b64encode(pem).decode("ascii")


def split_pem_bundle(pem: bytes) -> list[x509.Certificate]:
    """The certificates in a PEM bundle; raises `ValueError` when one does not parse."""
    return x509.load_pem_x509_certificates(pem) if b"-----BEGIN" in pem else []


def webhook_config_with_ca_bundle(config: dict[str, Any], bundle_b64: str) -> dict[str, Any] | None:
    """A Mutating/ValidatingWebhookConfiguration with every webhook's `caBundle` set.

    Webhooks that call a URL outside the cluster get the bundle too: they point at our server
    as well (e.g. a development setup calling the webhook on the host). `None`: no change.
    """
    hooks = config.get("webhooks")
    if not isinstance(hooks, list) or all(
        _client_config(h).get("caBundle") == bundle_b64 for h in hooks
    ):
        return None
    updated = copy.deepcopy(config)
    for hook in updated["webhooks"]:
        if isinstance(hook, dict):
            hook.setdefault("clientConfig", {})["caBundle"] = bundle_b64
    return updated


def crd_with_ca_bundle(crd: dict[str, Any], bundle_b64: str) -> dict[str, Any] | None:
    """A CRD with its conversion webhook's `caBundle` set; `None` when it has no conversion
    webhook (strategy `None`, the default) or already carries the bundle."""
    conversion = crd.get("spec", {}).get("conversion")
    if not isinstance(conversion, dict) or conversion.get("strategy") != "Webhook":
        return None
    webhook = conversion.get("webhook")
    client = webhook.get("clientConfig") if isinstance(webhook, dict) else None
    if isinstance(client, dict) and client.get("caBundle") == bundle_b64:
        return None
    updated = copy.deepcopy(crd)
    conv = updated["spec"]["conversion"]
    conv.setdefault("webhook", {}).setdefault("clientConfig", {})["caBundle"] = bundle_b64
    return updated


def _client_config(hook: Any) -> dict[str, Any]:
    client = hook.get("clientConfig") if isinstance(hook, dict) else None
    return client if isinstance(client, dict) else {}
