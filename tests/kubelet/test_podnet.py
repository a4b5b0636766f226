"""Which network a node gives its pods, and the names, CIDR and CNI configuration (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from localcluster.kubelet import podnet

ROOT = podnet.NetFacts(
    linux=True,
    euid=0,
    cap_net_admin=True,
    plugin_dir="/usr/lib/cni",
    plugins=frozenset({"bridge", "host-local", "loopback", "portmap"}),
    ip_tool=True,
)

MODES = {
    "root with the plugins": (ROOT, "pod", ""),
    "turned off": (dataclasses.replace(ROOT, disabled=True), "host", "TRAINOPS_POD_NETWORK=host"),
    "not Linux": (dataclasses.replace(ROOT, linux=False), "host", "need Linux"),
    "not root": (
        dataclasses.replace(ROOT, euid=1000, cap_net_admin=False),
        "host",
        "not running as root",
    ),
    "root without the capability": (
        dataclasses.replace(ROOT, cap_net_admin=False),
        "host",
        "root without CAP_NET_ADMIN",
    ),
    "a user with the capabilities": (dataclasses.replace(ROOT, euid=1000), "pod", ""),
    "plugins missing": (
        dataclasses.replace(ROOT, plugins=frozenset({"bridge"})),
        "host",
        "CNI plugin(s) host-local, loopback missing in /usr/lib/cni",
    ),
    "no ip command": (dataclasses.replace(ROOT, ip_tool=False), "host", "iproute2"),
}


@pytest.mark.parametrize(("facts", "mode", "reason"), MODES.values(), ids=MODES.keys())
def test_the_node_decides_its_network_mode_from_the_machine(facts, mode, reason) -> None:
    decision = podnet.decide(facts)
    assert decision.mode == mode
    assert reason in decision.reason
    if mode == "host":
        assert decision.reason.startswith("pods share the host network")
        assert "Service names do not resolve" in decision.banner()
        assert "Service names do not resolve" in decision.event()
    else:
        assert decision.banner() == ""


def test_names_are_per_node_and_fit_an_interface_name() -> None:
    a, b = podnet.names("/tmp/a"), podnet.names("/tmp/b")
    assert a != b and a == podnet.names("/tmp/a")
    assert len(a.bridge) <= 15
    ns = podnet.netns_name(a, "1234-uid")
    assert podnet.uid_of(a, ns) == "1234-uid"
    assert podnet.uid_of(b, ns) is None
    assert podnet.uid_of(a, a.netns_prefix) is None


def test_leftovers_are_this_nodes_namespaces_no_pod_keeps() -> None:
    n, other = podnet.names("/a"), podnet.names("/b")
    existing = [
        podnet.netns_name(n, "keep"),
        podnet.netns_name(n, "gone"),
        podnet.netns_name(other, "gone"),
        "somebody-else",
    ]
    assert podnet.leftovers(n, existing, {"keep"}) == [podnet.netns_name(n, "gone")]
    assert podnet.leftovers(n, existing, set()) == sorted(existing[:2])


CIDRS = {
    "the node's own spec.podCIDR wins": (
        {"node_cidr": "10.9.8.0/24", "previous": "10.244.1.0/24"},
        "10.9.8.0/24",
    ),
    "a node CIDR overlapping a route is not used": (
        {"node_cidr": "10.255.0.0/16", "routes": ["10.255.255.0/24"]},
        "10.244.0.0/24",
    ),
    "a public node CIDR is not used": (
        {"node_cidr": "8.8.8.0/24", "routes": ["10.244.0.0/24"]},
        "10.244.1.0/24",
    ),
    "the previous CIDR is kept when free": ({"previous": "10.244.7.0/24"}, "10.244.7.0/24"),
    "a taken previous CIDR is not": (
        {"previous": "10.244.7.0/24", "routes": ["10.244.7.0/24", "10.244.0.0/24"]},
        "10.244.1.0/24",
    ),
    "a route through our own bridge does not count": (
        {
            "previous": "10.244.7.0/24",
            "routes": ["10.244.7.0/24"],
            "own_bridge_routes": ["10.244.7.0/24"],
        },
        "10.244.7.0/24",
    ),
    "overlapping wider routes count": ({"routes": ["10.244.0.0/23"]}, "10.244.2.0/24"),
    "the whole pool taken": ({"routes": ["10.0.0.0/8"]}, None),
    "garbage routes are ignored": ({"routes": ["default", "nonsense"]}, "10.244.0.0/24"),
}


@pytest.mark.parametrize(("given", "expected"), CIDRS.values(), ids=CIDRS.keys())
def test_the_pod_cidr_is_a_free_slash_24(given, expected) -> None:
    args = {"node_cidr": "", "previous": "", "routes": [], **given}
    assert podnet.pick_cidr(**args) == expected


def test_a_seed_spreads_nodes_over_the_pool() -> None:
    picks = {podnet.pick_cidr(node_cidr="", previous="", routes=[], seed=s) for s in "abcdef"}
    assert len(picks) > 1


def test_cni_configs_keep_pod_traffic_on_the_bridge() -> None:
    n = podnet.names("/d")
    bridge, loopback, gateway = podnet.cni_configs(n, "10.244.3.0/24", "/d/network/ipam")
    assert gateway == "10.244.3.1/24"
    assert bridge["type"] == "bridge" and bridge["bridge"] == n.bridge
    assert bridge["isGateway"] is False and bridge["isDefaultGateway"] is False
    assert bridge["ipMasq"] is False
    assert bridge["ipam"] == {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.3.0/24", "gateway": "10.244.3.1"}]],
        "dataDir": "/d/network/ipam",
    }
    assert "routes" not in bridge["ipam"]  # no default route in pods
    assert loopback["type"] == "loopback"


def test_the_pod_address_is_read_from_the_cni_result() -> None:
    result = {"ips": [{"address": "fd00::5/64"}, {"interface": 2, "address": "10.244.3.2/24"}]}
    assert podnet.pod_address(result) == "10.244.3.2"
    assert podnet.pod_address({"ips": []}) is None


HOSTNAMES = {
    "the pod name": ({"metadata": {"name": "w-0"}, "spec": {}}, "w-0"),
    "spec.hostname wins": ({"metadata": {"name": "w-0"}, "spec": {"hostname": "box"}}, "box"),
    "cut to 63 without a trailing dash": (
        {"metadata": {"name": "a" * 62 + "-b"}, "spec": {}},
        "a" * 62,
    ),
}


@pytest.mark.parametrize(("pod", "expected"), HOSTNAMES.values(), ids=HOSTNAMES.keys())
def test_the_pods_hostname(pod, expected) -> None:
    assert podnet.hostname(pod) == expected


def test_only_our_nodes_with_a_deleted_data_directory_are_abandoned() -> None:
    owners = {
        "tnops0a1b2c": False,  # data directory gone
        "tnops3d4e5f": True,  # still there: its node reconciles it
        "tnopsffffff": False,  # this node
        "docker0": False,  # not a name of ours
        "tnopsxyz123": False,
    }
    assert podnet.abandoned(owners, "tnopsffffff") == ["tnops0a1b2c"]
    other = podnet.names_of("tnops0a1b2c")
    assert podnet.uid_of(other, "tnops0a1b2c-uid") == "uid"
