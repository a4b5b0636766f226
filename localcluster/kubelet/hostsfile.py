"""The hosts file of a pod (pure): its own names, and the Service names cluster DNS would answer.

A kubelet owns each pod's `/etc/hosts` (bind-mounted into the containers): localhost, the pod's
own address under its hostname, and `hostAliases`. On a cluster, Service names come from cluster
DNS; the process node has no DNS server, so the same file also carries the records DNS would
serve for the Services of the node's pods (the kubelet bind-mounts it on `/etc/hosts` in every
container's mount namespace and rewrites it in place as endpoints change):

- `<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`, `<svc>.<ns>` and, for the pod's own
  namespace, `<svc>` → the addresses of the ready pods its selector matches (every matching pod
  with an address when `publishNotReadyAddresses`). Headless Services answer exactly this; a
  ClusterIP Service has no virtual IP here, so its name also answers the pods' addresses.
- a pod with `hostname` and `subdomain` naming a headless Service of its namespace gets
  `<hostname>.<subdomain>.<ns>.svc.cluster.local` (and the shorter forms).

`endpoints` and `hosts_file` take `Endpoint` values (pods reduced to what DNS needs); the shell
builds them from the pods it runs and the Services it watches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLUSTER_DOMAIN", "Endpoint", "endpoint_of", "hosts_file", "service_records"]

CLUSTER_DOMAIN = "cluster.local"
HEADER = "# Kubernetes-managed hosts file (trainops process kubelet).\n"
_BASE = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


@dataclass(frozen=True)
class Endpoint:
    """A pod as DNS sees it."""

    namespace: str
    name: str
    ip: str
    ready: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    hostname: str = ""  # spec.hostname
    subdomain: str = ""  # spec.subdomain


def endpoint_of(pod: Mapping[str, Any], ip: str, ready: bool) -> Endpoint:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return Endpoint(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        ip=ip,
        ready=ready,
        labels=dict(meta.get("labels") or {}),
        hostname=str(spec.get("hostname") or ""),
        subdomain=str(spec.get("subdomain") or ""),
    )


def service_records(
    services: Iterable[Mapping[str, Any]], pods: Iterable[Endpoint]
) -> list[tuple[str, str, str]]:
    """(namespace, fully qualified name, ip) records of the Services' endpoints, sorted."""
    pods = [p for p in pods if p.ip]
    records: set[tuple[str, str, str]] = set()
    for svc in services:
        meta = svc.get("metadata") or {}
        spec = svc.get("spec") or {}
        ns = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        selector = spec.get("selector") or {}
        if not name or not selector or spec.get("type") == "ExternalName":
            continue
        everyone = bool(spec.get("publishNotReadyAddresses"))
        headless = spec.get("clusterIP") == "None"
        for p in pods:
            if p.namespace != ns or not (p.ready or everyone):
                continue
            if any(p.labels.get(k) != v for k, v in selector.items()):
                continue
            records.add((ns, f"{name}.{ns}.svc.{CLUSTER_DOMAIN}", p.ip))
            if headless and p.hostname and p.subdomain == name:
                records.add((ns, f"{p.hostname}.{name}.{ns}.svc.{CLUSTER_DOMAIN}", p.ip))
    return sorted(records)


def hosts_file(
    me: Endpoint,
    records: Sequence[tuple[str, str, str]],
    *,
    host_aliases: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole hosts file of pod `me` (its `ip` may be empty before it has one)."""
    out = [HEADER, _BASE]
    if me.ip:
        own = me.hostname or me.name
        if me.hostname and me.subdomain:
            fqdn = f"{me.hostname}.{me.subdomain}.{me.namespace}.svc.{CLUSTER_DOMAIN}"
            out.append(f"{me.ip}\t{fqdn}\t{own}\n")
        else:
            out.append(f"{me.ip}\t{own}\n")
    aliases = [
        "\t".join([str(a.get("ip")), *(str(h) for h in a.get("hostnames") or [])]) + "\n"
        for a in host_aliases
        if a.get("ip") and a.get("hostnames")
    ]
    if aliases:
        out.append("\n# Entries added by HostAliases.\n")
        out += aliases
    if records:
        out.append("\n# Service names (what cluster DNS would answer).\n")
    for ns, fqdn, ip in records:
        out.append(f"{ip}\t{' '.join(_forms(fqdn, ns, own_namespace=ns == me.namespace))}\n")
    return "".join(out)


def _forms(fqdn: str, ns: str, *, own_namespace: bool) -> list[str]:
    """The names a pod's resolver search path (`<ns>.svc.cluster.local svc.cluster.local
    cluster.local`) makes answer for `fqdn`, longest first."""
    svc_part = fqdn[: -len(f".{ns}.svc.{CLUSTER_DOMAIN}")]  # `svc` or `host.svc`
    forms = [fqdn, f"{svc_part}.{ns}.svc", f"{svc_part}.{ns}"]
    if own_namespace:
        forms.append(svc_part)
    return forms
