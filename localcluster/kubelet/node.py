"""The Node object and its Lease, built from machine facts (pure), plus reading those facts.

`machine_facts()` reads the machine once (cpu count, MemTotal from /proc/meminfo, disk size of
the data dir, kernel, OS, ids); `node_object` and `node_status` turn facts into API objects, and
`node_lease` the heartbeat Lease in `kube-node-lease`. The kubelet's log endpoint port is
published in `status.daemonEndpoints.kubeletEndpoint.Port`, where the API server finds it to
serve `pods/log`.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KUBELET_VERSION",
    "PROCESS_RUNTIME_LABEL",
    "MachineFacts",
    "machine_facts",
    "node_lease",
    "node_object",
    "node_status",
]

KUBELET_VERSION = "v1.32.0-trainops"
PROCESS_RUNTIME_LABEL = "trainops.tensorstack.dev/process-runtime"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
LEASE_SECONDS = 40
MAX_PODS = 110


@dataclass(frozen=True)
class MachineFacts:
    cpus: int
    memory_kib: int
    disk_bytes: int
    kernel: str
    os_image: str
    machine_id: str
    boot_id: str
    architecture: str
    hostname: str


def _read(path: str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def machine_facts(data_dir: Path) -> MachineFacts:
    mem_kib = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    if not mem_kib:  # no /proc (macOS): ask the C library
        try:
            mem_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
        except (ValueError, OSError):
            mem_kib = 0
    os_image = "Linux"
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            os_image = line.split("=", 1)[1].strip('"')
    arch = _ARCH.get(platform.machine(), platform.machine())
    return MachineFacts(
        cpus=os.cpu_count() or 1,
        memory_kib=mem_kib,
        disk_bytes=shutil.disk_usage(data_dir).total,
        kernel=platform.release(),
        os_image=os_image,
        machine_id=_read("/etc/machine-id"),
        boot_id=_read("/proc/sys/kernel/random/boot_id"),
        architecture=arch,
        hostname=platform.node(),
    )


def node_object(name: str, extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Node `name`, with the kubelet's labels and `extra_labels` (e.g. which `trainops up`
    instance joined it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": _ARCH.get(platform.machine(), platform.machine()),
                "node-role.kubernetes.io/control-plane": "",
                # Pods here are local processes (see docs/KUBELET.md).
                PROCESS_RUNTIME_LABEL: "true",
                **(extra_labels or {}),
            },
        },
        "spec": {},
    }


def node_status(
    facts: MachineFacts, *, port: int, now: str, ready_since: str, old: dict[str, Any] | None
) -> dict[str, Any]:
    """The Node's status; `ready_since` is the kubelet's start (Ready's transition time)."""
    capacity = {
        "cpu": str(facts.cpus),
        "memory": f"{facts.memory_kib}Ki",
        "ephemeral-storage": f"{facts.disk_bytes // 1024}Ki",
        "pods": str(MAX_PODS),
    }

    def cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
        prev = next((c for c in (old or {}).get("conditions") or [] if c.get("type") == kind), None)
        since = prev["lastTransitionTime"] if prev and prev.get("status") == status else None
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since or (ready_since if kind == "Ready" else now),
            "reason": reason,
            "message": message,
        }

    return {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": [
            cond(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            cond(
                "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
            ),
            cond(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            # Only the loopback address: kube-apiserver prefers a Hostname address to reach the
            # kubelet (logs, exec), and this machine's name may resolve to another interface.
            {"type": "InternalIP", "address": "127.0.0.1"},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {
            "machineID": facts.machine_id,
            "systemUUID": facts.machine_id,
            "bootID": facts.boot_id,
            "kernelVersion": facts.kernel,
            "osImage": facts.os_image,
            "containerRuntimeVersion": "trainops://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": facts.architecture,
        },
    }


def node_lease(name: str, node_uid: str, *, now_micro: str) -> dict[str, Any]:
    """The heartbeat Lease (`renewTime` is a MicroTime: RFC 3339 with microseconds)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-node-lease",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}
            ],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": now_micro,
        },
    }
