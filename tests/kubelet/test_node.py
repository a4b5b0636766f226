"""The Node object carries machine capacity and the kubelet's log port."""

from __future__ import annotations

from localcluster.kubelet.node import (
    PROCESS_RUNTIME_LABEL,
    MachineFacts,
    node_lease,
    node_object,
    node_status,
)

FACTS = MachineFacts(
    cpus=8,
    memory_kib=16 * 1024 * 1024,
    disk_bytes=100 * 2**30,
    kernel="6.1.0",
    os_image="Debian GNU/Linux 12 (bookworm)",
    machine_id="m",
    boot_id="b",
    architecture="amd64",
    hostname="laptop",
)


def test_capacity_addresses_and_kubelet_port() -> None:
    status = node_status(FACTS, port=10250, now="T2", ready_since="T1", old=None)
    assert status["capacity"] == {
        "cpu": "8",
        "memory": "16777216Ki",
        "ephemeral-storage": "104857600Ki",
        "pods": "110",
    }
    assert status["allocatable"] == status["capacity"]
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "True",
        "KubeletReady",
        "T1",
    )


def test_heartbeats_keep_transition_times() -> None:
    first = node_status(FACTS, port=1, now="T2", ready_since="T1", old=None)
    second = node_status(FACTS, port=1, now="T3", ready_since="T1", old=first)
    assert {c["lastHeartbeatTime"] for c in second["conditions"]} == {"T3"}
    assert [c["lastTransitionTime"] for c in second["conditions"]] == [
        c["lastTransitionTime"] for c in first["conditions"]
    ]


def test_the_node_is_labelled_as_a_process_runtime_and_leases_are_owned_by_it() -> None:
    assert node_object("trainops")["metadata"]["labels"][PROCESS_RUNTIME_LABEL] == "true"
    lease = node_lease("trainops", "uid-1", now_micro="2026-01-01T00:00:00.000000Z")
    assert lease["metadata"]["namespace"] == "kube-node-lease"
    assert lease["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert lease["spec"]["leaseDurationSeconds"] == 40
