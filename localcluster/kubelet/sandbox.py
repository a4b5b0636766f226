"""One pod's sandbox: its network namespace and address, hosts file and hostname (shell).

A kubelet creates a pod sandbox before the pod's first container and removes it after the last
one; the containers join it. Here the sandbox is the pod's network namespace (`netns.py`), its
hosts file (kept current by `names.ServiceNames`) and hostname, described in
`pods/<uid>/sandbox.json` for the shim that enters them (`shim.enter_sandbox`). Pods on the
host's network (no pod networks on this node, or `hostNetwork: true`) have none: address
127.0.0.1, the host's /etc/hosts.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from localcluster.kubelet import names, netns, podnet, shim

__all__ = ["HOST_IP", "PodSandbox"]

log = logging.getLogger("trainops.kubelet")

HOST_IP = "127.0.0.1"


class PodSandbox:
    def __init__(
        self, uid: str, pod_dir: Path, network: netns.PodNetworks, dns: names.ServiceNames
    ) -> None:
        self.uid = uid
        self.pod_dir = pod_dir
        self.network = network
        self.dns = dns
        self.made: netns.Sandbox | None = None
        self.ip = ""  # "" until set up; HOST_IP on the host's network
        self.dns_seen = ("", False)  # (ip, ready) the other pods' hosts files were told about

    @property
    def hosts_path(self) -> Path:
        return self.pod_dir / "etc-hosts"

    async def set_up(self, pod: dict[str, Any], *, host_network: bool) -> str | None:
        """Make the sandbox (or find the one an earlier run made); an error message if not."""
        if host_network:
            self.ip = HOST_IP
            return None
        try:
            self.made = await self.network.setup(self.uid)
        except netns.NetworkError as e:
            return f"Failed to create pod sandbox: {e}"
        self.ip = self.made.ip
        await self.dns.write(self.names(pod, ready=False))
        spec = self.spec(pod)
        await asyncio.to_thread(shim.write_json, str(self.pod_dir / "sandbox.json"), spec)
        return None

    def names(self, pod: dict[str, Any], *, ready: bool) -> names.PodNames:
        """The pod as the hosts files see it."""
        if self.made is None:
            return names.PodNames(pod, "", ready, None)
        return names.PodNames(pod, self.ip, ready, self.hosts_path)

    def reported(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        """A status was reported: tell the hosts files when the address or readiness changed."""
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        seen = self.names(pod, ready=ready)
        if (seen.ip, seen.ready) != self.dns_seen:
            self.dns_seen = (seen.ip, seen.ready)
            self.dns.changed()

    def spec(self, pod: dict[str, Any]) -> dict[str, str] | None:
        """What a shim enters: the netns, the hosts file, the hostname (None: nothing)."""
        if self.made is None:
            return None
        return {
            "netns": self.made.netns,
            "hosts": str(self.hosts_path),
            "hostname": podnet.hostname(pod),
        }

    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a command in the pod's namespaces (exec probes, hooks)."""
        if self.made is None:
            return ()
        return (
            sys.executable,
            "-I",
            "-S",
            shim.__file__,
            "exec",
            str(self.pod_dir / "sandbox.json"),
        )

    async def tear_down(self) -> None:
        """Remove the pod's network (a failure is logged: the next start retries)."""
        if not self.network.enabled:
            return
        self.dns.forget(self.hosts_path)
        try:
            await self.network.teardown(self.uid)
        except netns.NetworkError as e:
            log.warning("pod %s: network not removed (the next start retries): %s", self.uid, e)
        self.made = None
        self.dns.changed()
