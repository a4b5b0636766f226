"""Pod networking decisions (pure): which mode the node runs in, names, CIDR, CNI configuration.

A kubelet gives every pod its own network namespace, wired by CNI plugins from a configuration
the node owns. The process node does the same when it can (`netns.py` is the thin adapter that
runs `ip` and the plugins); everything it has to *decide* is here, as functions over plain
values, so the rules are table-tested without touching the machine:

- `decide(facts)`: `pod` mode (one netns per pod, an address from the node's pod CIDR, a bridge)
  or `host` mode (every pod shares the host's network, as before) with the reason, worded for
  the `up` banner and for the Warning event every pod then gets. Never silently.
- `names(key)`: the bridge and namespace names of one node, derived from its data directory, so
  several nodes on one machine (parallel test runs) never touch each other's interfaces.
- `pick_cidr(...)`: the node's pod CIDR: the Node's `spec.podCIDR` if it has one, else the one
  this node used before, else the first free /24 of `POOL` (free = overlapping no route).
- `cni_configs(...)`: the bridge (+ host-local IPAM) and loopback configurations. The bridge
  gets its address from the node itself, not from the plugin (`isGateway: false`): no default
  route in pods, no masquerade, no change to the host's `ip_forward` — pod traffic stays on the
  bridge, and the node reaches pods through the bridge's connected route.
- `leftovers(...)`: the namespaces a crashed node left behind that no pod needs any more.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CNI_VERSION",
    "NEEDED_PLUGINS",
    "POOL",
    "NetDecision",
    "NetFacts",
    "NetNames",
    "abandoned",
    "cni_configs",
    "decide",
    "hostname",
    "leftovers",
    "names",
    "names_of",
    "netns_name",
    "pick_cidr",
    "pod_address",
    "uid_of",
]

CNI_VERSION = "1.0.0"
NEEDED_PLUGINS = ("bridge", "host-local", "loopback")
# Pod CIDRs come from here, one /24 per node; 10.255/16 is left alone (resolvers live there).
POOL = "10.244.0.0/16"
POD_PREFIX_LEN = 24
HOST_REASON_PREFIX = "pods share the host network"
_NETNS_TAG = "-"
_HOSTNAME_MAX = 63


@dataclass(frozen=True)
class NetFacts:
    """What the machine offers, read once at start (`netns.read_facts`)."""

    linux: bool
    euid: int
    cap_net_admin: bool  # CAP_NET_ADMIN and CAP_SYS_ADMIN are both effective
    plugin_dir: str
    plugins: frozenset[str]  # the executables found in plugin_dir
    ip_tool: bool  # `ip` (iproute2) is on PATH
    disabled: bool = False  # TRAINOPS_POD_NETWORK=host, or the node was started without


@dataclass(frozen=True)
class NetDecision:
    mode: str  # "pod" or "host"
    reason: str  # why host mode ("" in pod mode)

    @property
    def pod_network(self) -> bool:
        return self.mode == "pod"

    def banner(self) -> str:
        """One line for `up`'s banner."""
        if self.pod_network:
            return ""
        return (
            f"{self.reason}: no pod IPs (every pod reports 127.0.0.1), Service names do not "
            "resolve, and two pods listening on the same port collide"
        )

    def event(self) -> str:
        """The Warning event each pod gets in host mode."""
        return (
            f"{self.reason}: this pod has no IP of its own and Service names do not resolve in "
            "it (see docs/KUBELET.md, networking)"
        )


@dataclass(frozen=True)
class NetNames:
    bridge: str  # <= 15 characters (IFNAMSIZ - 1)
    netns_prefix: str  # every namespace of this node starts with it
    network: str  # the CNI network name


def decide(facts: NetFacts) -> NetDecision:
    """Pod networking when the node can create namespaces and the plugins are installed."""
    if facts.disabled:
        return NetDecision(
            "host", f"{HOST_REASON_PREFIX} (pod networks turned off: TRAINOPS_POD_NETWORK=host)"
        )
    if not facts.linux:
        return NetDecision("host", f"{HOST_REASON_PREFIX} (network namespaces need Linux)")
    if not facts.cap_net_admin:
        who = "not running as root" if facts.euid != 0 else "root without CAP_NET_ADMIN"
        return NetDecision(
            "host",
            f"{HOST_REASON_PREFIX} ({who}: pod networks need CAP_NET_ADMIN and CAP_SYS_ADMIN)",
        )
    missing = [p for p in NEEDED_PLUGINS if p not in facts.plugins]
    if missing:
        return NetDecision(
            "host",
            f"{HOST_REASON_PREFIX} (CNI plugin(s) {', '.join(missing)} missing in "
            f"{facts.plugin_dir}; Debian/Ubuntu: apt install containernetworking-plugins)",
        )
    if not facts.ip_tool:
        return NetDecision("host", f"{HOST_REASON_PREFIX} (the `ip` command, iproute2, is missing)")
    return NetDecision("pod", "")


def names(key: str) -> NetNames:
    """Names of one node's network objects; `key` identifies the node (its data directory)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:6]
    return NetNames(
        bridge=f"tnops{digest}", netns_prefix=f"tnops{digest}", network=f"tnops{digest}"
    )


def names_of(prefix: str) -> NetNames:
    """The names of the node whose objects start with `prefix` (from its owner record)."""
    return NetNames(bridge=prefix, netns_prefix=prefix, network=prefix)


def abandoned(owners: Mapping[str, bool], own_prefix: str) -> list[str]:
    """Prefixes of other nodes on this machine whose data directory is gone (`owners`: prefix →
    whether its data directory still exists): nothing can reconcile their namespaces and
    bridge any more, so any node removes them. A name that is not ours is never touched."""
    return sorted(
        prefix
        for prefix, exists in owners.items()
        if not exists and prefix != own_prefix and _is_ours(prefix)
    )


def _is_ours(prefix: str) -> bool:
    tail = prefix.removeprefix("tnops")
    return (
        prefix.startswith("tnops") and len(tail) == 6 and all(c in "0123456789abcdef" for c in tail)
    )


def netns_name(n: NetNames, uid: str) -> str:
    return f"{n.netns_prefix}{_NETNS_TAG}{uid}"


def uid_of(n: NetNames, netns: str) -> str | None:
    """The pod uid of one of this node's namespaces (None for anybody else's)."""
    head = n.netns_prefix + _NETNS_TAG
    return netns[len(head) :] if netns.startswith(head) and len(netns) > len(head) else None


def leftovers(n: NetNames, existing: Iterable[str], keep_uids: Iterable[str]) -> list[str]:
    """This node's namespaces whose pod is not in `keep_uids` (sorted)."""
    keep = set(keep_uids)
    return sorted(ns for ns in existing if (uid := uid_of(n, ns)) is not None and uid not in keep)


def pick_cidr(
    *,
    node_cidr: str,
    previous: str,
    routes: Iterable[str],
    own_bridge_routes: Iterable[str] = (),
    seed: str = "",
) -> str | None:
    """The node's pod CIDR, or None when no /24 of `POOL` is free.

    `routes` are the destinations of the machine's IPv4 routes (CIDR strings); those through
    this node's own bridge (`own_bridge_routes`) do not count as taken. A CIDR given on the
    Node (`spec.podCIDR`) wins if it is a private IPv4 network that overlaps no route, as a
    kubelet takes what the controller manager assigned.
    """
    own = {ipaddress.ip_network(r, strict=False) for r in own_bridge_routes}
    taken = [
        net for r in routes if (net := _net(r)) is not None and net not in own and net.prefixlen > 0
    ]
    if node_cidr:
        net = _net(node_cidr)
        if (
            isinstance(net, ipaddress.IPv4Network)
            and net.is_private
            and net.prefixlen <= 30
            and not any(net.overlaps(t) for t in taken if t.version == 4)
        ):
            return str(net)
    candidates = list(ipaddress.IPv4Network(POOL).subnets(new_prefix=POD_PREFIX_LEN))
    start = int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(candidates) if seed else 0
    ordered: list[ipaddress.IPv4Network] = []
    prev = _net(previous) if previous else None
    if isinstance(prev, ipaddress.IPv4Network):
        ordered.append(prev)
    ordered += candidates[start:] + candidates[:start]
    for net in ordered:
        if not any(net.overlaps(t) for t in taken if t.version == 4):
            return str(net)
    return None


def cni_configs(
    n: NetNames, cidr: str, ipam_dir: str
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(bridge configuration, loopback configuration, the bridge's own address as CIDR)."""
    net = ipaddress.ip_network(cidr)
    gateway = next(net.hosts())
    bridge = {
        "cniVersion": CNI_VERSION,
        "name": n.network,
        "type": "bridge",
        "bridge": n.bridge,
        "isGateway": False,
        "isDefaultGateway": False,
        "ipMasq": False,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": str(net), "gateway": str(gateway)}]],
            "dataDir": ipam_dir,
        },
    }
    loopback = {"cniVersion": CNI_VERSION, "name": "lo", "type": "loopback"}
    return bridge, loopback, f"{gateway}/{net.prefixlen}"


def pod_address(result: Mapping[str, Any]) -> str | None:
    """The pod's IPv4 address from a CNI ADD result (`ips[].address` is CIDR notation)."""
    for ip in result.get("ips") or []:
        address = str((ip or {}).get("address") or "")
        if not address:
            continue
        iface = ipaddress.ip_interface(address)
        if iface.version == 4:
            return str(iface.ip)
    return None


def hostname(pod: Mapping[str, Any]) -> str:
    """The pod's hostname: `spec.hostname`, else its name, cut to 63 characters (the kubelet
    cuts it and drops trailing `-`/`.`)."""
    spec = pod.get("spec") or {}
    name = str(spec.get("hostname") or (pod.get("metadata") or {}).get("name") or "")
    if len(name) > _HOSTNAME_MAX:
        name = name[:_HOSTNAME_MAX].rstrip("-.")
    return name


def _net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if text == "default":
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
