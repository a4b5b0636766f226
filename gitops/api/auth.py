"""Who may call the GitOps HTTP API (pure): loopback names, cross-site requests, bearer tokens.

`gitops.api.routes` applies these rules (docs/GITOPS.md, "HTTP API and CLI"):

- `is_loopback(host)`: a bind address or a `Host` header's name that only this machine reaches —
  `localhost` and `*.localhost` (RFC 6761), `127.0.0.0/8`, `::1` (bracketed or not). An API
  bound to loopback refuses requests whose `Host` is anything else, so a web page that rebinds
  its own DNS name to 127.0.0.1 cannot read or drive it.
- `cross_site(headers)`: why a browser-sent POST comes from another site, or None. Browsers
  label their requests (`Sec-Fetch-Site`, `Origin`); a request without either is not from a
  browser page (the CLI, curl, a Git host) and passes. Refused: `Sec-Fetch-Site` other than
  `same-origin`/`none`, an `Origin` of `null` (unless `Sec-Fetch-Site: same-origin` vouches for
  it: a form of our own pages under `Referrer-Policy: no-referrer`), an `Origin` whose host and
  port differ from the `Host` header (the origin's default port dropped, as browsers drop it
  from `Host`; the scheme is not compared, as a TLS-terminating proxy may sit in front).
- `bearer_matches(authorization, token)`: `Authorization: Bearer <token>`, compared in constant
  time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["bearer_matches", "cross_site", "host_name", "is_loopback"]

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address or a host name, IPv6 with or without brackets, no port)
    names this machine only. The empty string and `0.0.0.0`/`::` (every interface) do not."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name part of a `Host` header value (`[::1]:8080` → `::1`, `a:80` → `a`)."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    return text.rpartition(":")[0] if text.count(":") == 1 else text


def cross_site(headers: Mapping[str, str]) -> str | None:
    """Why this request is a cross-site browser request (to refuse with 403), or None."""
    fetch_site = (headers.get("Sec-Fetch-Site") or "").strip().lower()
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {fetch_site})"
    origin = headers.get("Origin")
    if origin is None:
        return None
    origin = origin.strip()
    if origin.lower() == "null":
        if fetch_site == "same-origin":
            # A form of our own pages: browsers send `Origin: null` for a form POST under
            # `Referrer-Policy: no-referrer` (the dashboard's), and `Sec-Fetch-Site`, which no
            # page can set, says it is same-origin.
            return None
        return "cross-site request refused (Origin: null)"
    host = headers.get("Host")
    if host is None or _origin_host(origin) != _host_port(host, None):
        return f"cross-site request refused (Origin {origin} is not this server)"
    return None


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether `authorization` is `Bearer <token>` (the scheme case-insensitive)."""
    if not authorization:
        return False
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def _origin_host(origin: str) -> str | None:
    try:
        parts = urlsplit(origin)
        _ = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return _host_port(parts.netloc, parts.scheme.lower())


def _host_port(netloc: str, scheme: str | None) -> str:
    """`host[:port]` lower-cased; for an origin (`scheme` given) without its scheme's default
    port, which browsers leave out of `Host` too."""
    text = netloc.strip().lower().rpartition("@")[2]
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[: end + 1], text[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if scheme is not None and port == _DEFAULT_PORTS.get(scheme):
        port = ""
    return f"{host}:{port}" if port else host
