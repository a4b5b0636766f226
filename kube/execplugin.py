"""Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1): what a plugin is
given and what it prints, pure. `kube.auth` runs the plugin and keeps its credential.

A plugin gets an ExecCredential in `$KUBERNETES_EXEC_INFO` (`exec_info`: `spec.interactive`,
and `spec.cluster` — server, TLS settings, CA data, the cluster's exec extension — when the
kubeconfig says `provideClusterInfo: true`) and prints one with a `status` (`parse_exec_credential`):
a bearer `token`, or `clientCertificateData` and `clientKeyData` (PEM), and an optional
`expirationTimestamp`; without one the credential is used until the API server answers 401.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kube.config import Config, ConfigError, ExecConfig

__all__ = ["ExecCredential", "exec_info", "parse_exec_credential"]


@dataclass(frozen=True)
class ExecCredential:
    """What an exec plugin answered: a token or a client certificate and key (PEM), and when
    it expires (None: until the API server refuses it)."""

    token: str | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = None
    expiry: datetime | None = None


def exec_info(config: Config, *, interactive: bool = False) -> dict[str, Any]:
    """The ExecCredential a plugin gets in `$KUBERNETES_EXEC_INFO` (cluster details only when
    the kubeconfig asks for them with `provideClusterInfo`)."""
    plugin = config.exec
    assert plugin is not None
    spec: dict[str, Any] = {"interactive": interactive}
    if plugin.provide_cluster_info:
        cluster: dict[str, Any] = {"server": config.server}
        if config.tls_server_name:
            cluster["tls-server-name"] = config.tls_server_name
        if config.insecure:
            cluster["insecure-skip-tls-verify"] = True
        if config.ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(config.ca_data).decode()
        if config.proxy_url:
            cluster["proxy-url"] = config.proxy_url
        if plugin.cluster_config is not None:
            cluster["config"] = plugin.cluster_config
        spec["cluster"] = cluster
    return {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}


def parse_exec_credential(output: bytes, plugin: ExecConfig, source: str) -> ExecCredential:
    """What an exec plugin printed: an ExecCredential of the plugin's apiVersion with a token
    or a client certificate and key, and an optional expirationTimestamp (RFC 3339)."""
    import json

    who = f"{source}: exec plugin {plugin.command}"
    try:
        doc = json.loads(output)
    except ValueError:
        raise ConfigError(who, "", "printed no JSON ExecCredential") from None
    if not isinstance(doc, dict):
        raise ConfigError(who, "", f"printed {type(doc).__name__}, not an ExecCredential")
    if doc.get("kind") != "ExecCredential":
        raise ConfigError(who, "kind", f"{doc.get('kind')!r}, expected 'ExecCredential'")
    if doc.get("apiVersion") != plugin.api_version:
        raise ConfigError(
            who,
            "apiVersion",
            f"{doc.get('apiVersion')!r}, the kubeconfig asks for {plugin.api_version!r}",
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ConfigError(who, "status", "missing")
    token = status.get("token") or None
    cert = status.get("clientCertificateData") or None
    key = status.get("clientKeyData") or None
    if token is not None and not isinstance(token, str):
        raise ConfigError(who, "status.token", "not a string")
    if (cert is None) != (key is None):
        raise ConfigError(who, "status", "clientCertificateData and clientKeyData come together")
    if token is None and cert is None:
        raise ConfigError(who, "status", "neither a token nor a client certificate")
    expiry = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            expiry = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(
                who, "status.expirationTimestamp", f"{stamp!r} is not RFC 3339"
            ) from None
        if expiry.tzinfo is None:
            raise ConfigError(who, "status.expirationTimestamp", f"{stamp!r} has no time zone")
    return ExecCredential(
        token=token,
        client_cert=str(cert).encode() if cert else None,
        client_key=str(key).encode() if key else None,
        expiry=expiry,
    )
