"""Pod network namespaces on this machine: the thin adapter that runs `ip` and the CNI plugins.

What to do is decided in `podnet` (pure); this module only does it, as a kubelet with a CNI
network does: one named network namespace per pod (`ip netns add`, so it lives in
/run/netns and survives the kubelet), wired by the real plugins from the node's own
configuration (`DATA_DIR/network/cni/*.conf`): `loopback`, then `bridge` with `host-local`
IPAM on the node's pod CIDR. The bridge is made by the node with the CIDR's first address, so
the node reaches every pod through its connected route and pods reach each other over the
bridge; nothing routes out of it (no default route in pods, no masquerade, `ip_forward`
untouched).

Every call is a subprocess with a timeout, awaited off the event loop; a failure is a
`NetworkError` with the command's own message. Clean-up is level-triggered: `reconcile` (at
start) removes every namespace of this node that no running pod needs, and the bridge and IPAM
state when none is left; `teardown` removes one pod's; `stop` removes all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.kubelet import podnet, shim

__all__ = ["NETNS_DIR", "OWNERS_DIR", "NetworkError", "PodNetworks", "Sandbox", "read_facts"]

log = logging.getLogger("trainops.kubelet")

NETNS_DIR = Path("/run/netns")
# One file per node with pod networks on this machine, named by its prefix, holding its data
# directory: a node whose data directory was deleted (a crashed test run) is cleaned up by the
# next node that starts.
OWNERS_DIR = Path("/run/trainops/pod-networks")
COMMAND_SECONDS = 15.0
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21
PLUGIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")


class NetworkError(Exception):
    """Setting up or tearing down a pod network failed (the message says which step)."""


@dataclass(frozen=True)
class Sandbox:
    netns: str  # path of the pod's network namespace
    ip: str


def read_facts() -> podnet.NetFacts:
    """What this machine offers for pod networks (blocking: call in a thread)."""
    cap_eff = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                cap_eff = int(line.split()[1], 16)
    caps = all(cap_eff >> bit & 1 for bit in (_CAP_NET_ADMIN, _CAP_SYS_ADMIN))
    configured = os.environ.get("TRAINOPS_CNI_PATH", "")
    dirs = [configured] if configured else list(PLUGIN_DIRS)
    plugin_dir = next((d for d in dirs if os.path.isdir(d)), dirs[0])
    plugins: frozenset[str] = frozenset()
    with contextlib.suppress(OSError):
        plugins = frozenset(
            p for p in os.listdir(plugin_dir) if os.access(os.path.join(plugin_dir, p), os.X_OK)
        )
    return podnet.NetFacts(
        linux=sys.platform == "linux",
        euid=os.geteuid(),
        cap_net_admin=caps,
        plugin_dir=plugin_dir,
        plugins=plugins,
        ip_tool=shutil.which("ip") is not None,
        disabled=os.environ.get("TRAINOPS_POD_NETWORK", "") == "host",
    )


class PodNetworks:
    """One node's pod networks. `decision` says whether pods get one (`start` sets it)."""

    def __init__(self, data_dir: Path, *, allowed: bool = True) -> None:
        self.allowed = allowed
        self.dir = data_dir / "network"
        self.names = podnet.names(str(data_dir.resolve()))
        self.decision = podnet.NetDecision("host", "not started")
        self.facts: podnet.NetFacts | None = None
        self.cidr = ""
        self._bridge_conf: dict[str, Any] = {}
        self._loopback_conf: dict[str, Any] = {}
        self._gateway = ""
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return self.decision.pod_network

    def netns_path(self, uid: str) -> str:
        return str(NETNS_DIR / podnet.netns_name(self.names, uid))

    async def start(self, *, node_cidr: str, keep_uids: set[str]) -> None:
        """Decide the mode; in pod mode pick the CIDR, write the CNI configuration and remove
        what a previous run left that no running pod in `keep_uids` needs."""
        facts = await asyncio.to_thread(read_facts)
        if not self.allowed:
            facts = dataclasses.replace(facts, disabled=True)
        self.facts = facts
        self.decision = podnet.decide(facts)
        if not self.enabled:
            return
        try:
            await self._start_pod_networks(node_cidr, keep_uids)
        except (NetworkError, OSError) as e:
            reason = e if isinstance(e, NetworkError) else e.strerror
            self.decision = podnet.NetDecision(
                "host", f"{podnet.HOST_REASON_PREFIX} (setting up pod networks failed: {reason})"
            )
            with contextlib.suppress(OSError):  # nothing of this node to clean up later
                await asyncio.to_thread((OWNERS_DIR / self.names.netns_prefix).unlink)

    async def _start_pod_networks(self, node_cidr: str, keep_uids: set[str]) -> None:
        routes, own = await self._routes()
        state = await asyncio.to_thread(_read_json, self.dir / "state.json")
        cidr = podnet.pick_cidr(
            node_cidr=node_cidr,
            previous=str(state.get("cidr") or ""),
            routes=routes,
            own_bridge_routes=own,
            seed=self.names.bridge,
        )
        if cidr is None:
            self.decision = podnet.NetDecision(
                "host", f"{podnet.HOST_REASON_PREFIX} (no free /24 left in {podnet.POOL})"
            )
            return
        self.cidr = cidr
        ipam = str(self.dir / "ipam")
        self._bridge_conf, self._loopback_conf, self._gateway = podnet.cni_configs(
            self.names, cidr, ipam
        )
        await asyncio.to_thread(self._write_config)
        await self.reconcile(keep_uids)
        await self._check_sandbox()
        await self._sweep_abandoned()

    async def _check_sandbox(self) -> None:
        """Enter a throwaway sandbox the way every container will (a network namespace, then
        mount and UTS namespaces with a bind mount): pods get networks only if that works
        here, so a machine that refuses it falls back at start instead of failing each pod."""
        name = podnet.netns_name(self.names, "probe")
        path = str(NETNS_DIR / name)
        hosts, spec = self.dir / "probe-hosts", self.dir / "probe-sandbox.json"
        sandbox = {"netns": path, "hosts": str(hosts), "hostname": "probe"}
        await asyncio.to_thread(hosts.write_text, "127.0.0.1\tlocalhost\n")
        await asyncio.to_thread(spec.write_text, json.dumps(sandbox))
        await self._run("ip", "netns", "add", name)
        try:
            await self._run(sys.executable, "-I", "-S", shim.__file__, "exec", str(spec), "true")
        finally:
            await self._run("ip", "netns", "delete", name)

    def _write_config(self) -> None:
        conf = self.dir / "cni"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / f"10-{self.names.network}.conf").write_text(json.dumps(self._bridge_conf, indent=2))
        (conf / "99-loopback.conf").write_text(json.dumps(self._loopback_conf, indent=2))
        (self.dir / "state.json").write_text(json.dumps({"cidr": self.cidr}))
        OWNERS_DIR.mkdir(parents=True, exist_ok=True)
        (OWNERS_DIR / self.names.netns_prefix).write_text(str(self.dir.parent.resolve()))

    async def _sweep_abandoned(self) -> None:
        """Remove the namespaces and bridge of nodes whose data directory is gone."""

        def owners() -> dict[str, bool]:
            found = {}
            for entry in OWNERS_DIR.iterdir() if OWNERS_DIR.is_dir() else []:
                with contextlib.suppress(OSError):
                    found[entry.name] = os.path.isdir(entry.read_text().strip())
            return found

        for prefix in podnet.abandoned(await asyncio.to_thread(owners), self.names.netns_prefix):
            other = podnet.names_of(prefix)
            try:
                spaces, bridge = await _remaining(other)
                for ns in spaces:
                    await self._run("ip", "netns", "delete", ns)
                if bridge:
                    await self._run("ip", "link", "delete", other.bridge)
            except NetworkError as e:
                # Another node starting at the same time may have swept them first.
                if await _remaining(other) != ([], False):
                    log.warning("pod networks of a removed node (%s) not cleaned up: %s", prefix, e)
                    continue
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread((OWNERS_DIR / prefix).unlink)

    async def reconcile(self, keep_uids: set[str]) -> list[str]:
        """Remove this node's namespaces whose pods are not in `keep_uids`; the bridge and the
        IPAM state too when no namespace is left. Returns the namespaces removed."""
        async with self._lock:
            existing = await asyncio.to_thread(_list_netns)
            gone = podnet.leftovers(self.names, existing, keep_uids)
            for ns in gone:
                uid = podnet.uid_of(self.names, ns) or ""
                await self._remove(uid)
            await self._drop_bridge_if_unused()
            return gone

    async def setup(self, uid: str) -> Sandbox:
        """The pod's namespace with its address (made now, or found from an earlier run)."""
        async with self._lock:
            path = self.netns_path(uid)
            record = await asyncio.to_thread(_read_json, self.dir / "pods" / f"{uid}.json")
            if os.path.exists(path) and record.get("ip"):
                return Sandbox(path, str(record["ip"]))
            await self._ensure_bridge()
            if os.path.exists(path):  # half made by a crashed run: start over
                await self._remove(uid)
            await self._run("ip", "netns", "add", podnet.netns_name(self.names, uid))
            try:
                await self._cni("ADD", self._loopback_conf, uid, path, "lo")
                result = await self._cni("ADD", self._bridge_conf, uid, path, "eth0")
                ip = podnet.pod_address(result)
                if ip is None:
                    raise NetworkError(f"the bridge plugin gave no IPv4 address: {result}")
            except BaseException:
                with contextlib.suppress(Exception):
                    await self._remove(uid)
                raise
            await asyncio.to_thread(_write_json, self.dir / "pods" / f"{uid}.json", {"ip": ip})
            return Sandbox(path, ip)

    async def teardown(self, uid: str) -> None:
        """Remove the pod's namespace (its veth goes with it) and release its address."""
        async with self._lock:
            await self._remove(uid)
            await self._drop_bridge_if_unused()

    async def stop(self) -> None:
        """Remove every namespace of this node, then the bridge (nothing runs any more)."""
        if self.enabled:
            await self.reconcile(set())
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread((OWNERS_DIR / self.names.netns_prefix).unlink)

    # -- steps --------------------------------------------------------------------------
    async def _remove(self, uid: str) -> None:
        path = self.netns_path(uid)
        name = podnet.netns_name(self.names, uid)
        if self._bridge_conf:
            # DEL releases the address; it tolerates a namespace that is already gone.
            with contextlib.suppress(NetworkError):
                await self._cni("DEL", self._bridge_conf, uid, path, "eth0")
        if os.path.exists(path):
            await self._run("ip", "netns", "delete", name)
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread((self.dir / "pods" / f"{uid}.json").unlink)

    async def _ensure_bridge(self) -> None:
        bridge = self.names.bridge
        if not await asyncio.to_thread(os.path.exists, f"/sys/class/net/{bridge}"):
            await self._run("ip", "link", "add", bridge, "type", "bridge")
        addrs = await self._run("ip", "-j", "addr", "show", "dev", bridge)
        have = {
            f"{a.get('local')}/{a.get('prefixlen')}"
            for link in json.loads(addrs or "[]")
            for a in link.get("addr_info") or []
        }
        if self._gateway not in have:
            await self._run("ip", "addr", "add", self._gateway, "dev", bridge)
        await self._run("ip", "link", "set", bridge, "up")

    async def _drop_bridge_if_unused(self) -> None:
        existing = await asyncio.to_thread(_list_netns)
        if any(podnet.uid_of(self.names, ns) is not None for ns in existing):
            return
        if await asyncio.to_thread(os.path.exists, f"/sys/class/net/{self.names.bridge}"):
            await self._run("ip", "link", "delete", self.names.bridge)
        await asyncio.to_thread(shutil.rmtree, self.dir / "ipam", True)
        await asyncio.to_thread(shutil.rmtree, self.dir / "pods", True)

    async def _routes(self) -> tuple[list[str], list[str]]:
        """(destinations of all IPv4 routes, those through this node's bridge)."""
        out = await self._run("ip", "-j", "-4", "route", "show", "table", "all")
        routes = json.loads(out or "[]")
        dests = [str(r.get("dst")) for r in routes if r.get("dst") and r.get("dst") != "default"]
        own = [str(r["dst"]) for r in routes if r.get("dev") == self.names.bridge and r.get("dst")]
        return dests, own

    async def _cni(
        self, command: str, conf: dict[str, Any], uid: str, netns: str, ifname: str
    ) -> dict[str, Any]:
        assert self.facts is not None
        plugin = os.path.join(self.facts.plugin_dir, str(conf["type"]))
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": uid,
            "CNI_NETNS": netns,
            "CNI_IFNAME": ifname,
            "CNI_PATH": self.facts.plugin_dir,
        }
        out = await self._run(plugin, stdin=json.dumps(conf).encode(), env=env)
        if command != "ADD":
            return {}
        try:
            value = json.loads(out)
        except ValueError as e:
            raise NetworkError(f"{conf['type']} plugin: unreadable result {out[:200]!r}") from e
        return value if isinstance(value, dict) else {}

    async def _run(self, *argv: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> str:
        """Run one command with a timeout; its stdout, or NetworkError with its message."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            raise NetworkError(f"{argv[0]}: {e.strerror}") from e
        try:
            async with asyncio.timeout(COMMAND_SECONDS):
                out, err = await proc.communicate(stdin)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise NetworkError(
                f"{' '.join(argv[:4])}: no answer within {COMMAND_SECONDS:g} s"
            ) from None
        if proc.returncode != 0:
            # CNI plugins report errors as JSON on stdout ({"code", "msg", "details"}).
            text = (err or out).decode(errors="replace").strip()
            with contextlib.suppress(ValueError, AttributeError):
                parsed = json.loads(out)
                text = f"{parsed.get('msg', '')} {parsed.get('details', '')}".strip() or text
            raise NetworkError(f"{' '.join(argv[:4])}: {text}")
        return out.decode(errors="replace")


def _list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except OSError:
        return []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


async def _remaining(names: podnet.NetNames) -> tuple[list[str], bool]:
    """The network namespaces of `names`' node still there, and whether its bridge is."""
    spaces = podnet.leftovers(names, await asyncio.to_thread(_list_netns), ())
    bridge = await asyncio.to_thread(os.path.exists, f"/sys/class/net/{names.bridge}")
    return spaces, bridge
