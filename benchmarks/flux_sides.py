"""The two GitOps implementations `bench_flux.py` compares, each behind one `Side`: how it is
started and stopped (its processes, their CPU time and RSS), the object that points it at the
repository, whether it reports a commit applied, and how a push webhook and a forced full
reconcile are sent to it, with a check that is true once it has handled them.

- `Flux`: source-controller and kustomize-controller, built by `hack/flux-peer`, run as
  processes with their logs in LOGS; a GitRepository and a Kustomization.
- `Trainops`: `trainops up --kubeconfig K` without job controller or node
  (`bench_gitops.Up`); a JobRepository, triggered through its HTTP API.

Also the helpers both need: `until` (poll with a deadline), `flux_peer`, free ports, RSS.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import bench_controller as bc
from benchmarks import bench_gitops as bg
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import errors, resources

REPO = Path(__file__).resolve().parents[1]

GIT_REPOSITORIES = resources.Resource(
    "source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository", True
)
KUSTOMIZATIONS = resources.Resource(
    "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization", True
)
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
WEBHOOK_CONFIGURATION = "trainops-webhook"  # webhook.configurations.CONFIGURATION_NAME
NAME = "jobs"
INTERVAL = "10m"
LOGS = Path(tempfile.gettempdir()) / "bench-flux-logs"


def flux_versions() -> str:
    return flux_peer("versions")


def flux_peer(*args: str) -> str:
    """Run `hack/flux-peer` with `args`; its output (the reason and exit on failure)."""
    done = subprocess.run(
        [str(REPO / "hack" / "flux-peer"), *args], capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(f"hack/flux-peer {' '.join(args)}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid`, MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


POLL = [0.02]
"""Seconds between two checks of `until` (`bench_flux.py --poll`): what a trigger's time is
quantized to — at 20 ms both sides' no-op triggers sit at 27–30 ms on a quiet machine."""


async def until(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> float:
    """Poll `check` every `POLL` seconds until it is true; the perf_counter time it was first
    seen."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return time.perf_counter()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(POLL[0])


@dataclass
class Side:
    """One GitOps implementation under test: processes, objects, triggers and their ends."""

    client: Any  # bench_flux.Counting
    kubeconfig: Path
    url: str
    work: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    title = ""

    def cpu(self) -> float:
        return sum(bc._cpu_seconds(p.pid) for p in self.procs)

    def rss(self) -> tuple[float, float]:
        pairs = [_rss_mib(p.pid) for p in self.procs]
        return sum(a for a, _ in pairs), sum(b for _, b in pairs)

    def check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise SystemExit(
                    f"{self.title}: {p.args!r} exited with {p.returncode} (logs {LOGS})"
                )

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    async def create(self, ns: str) -> None:
        raise NotImplementedError

    async def at(self, ns: str, sha: str) -> bool:
        """Whether the repository object reports `sha` applied."""
        raise NotImplementedError

    async def push_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        """Trigger a fetch as a push webhook would; a check that is true once it was handled."""
        raise NotImplementedError

    async def full_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        """Force a full reconcile (nothing changed); a check that is true once it was handled."""
        raise NotImplementedError


class Flux(Side):
    title = "Flux"

    async def start(self) -> None:
        LOGS.mkdir(exist_ok=True)
        base = Path(flux_peer("bin"))
        source, kustomize = _flux_binaries(base)
        storage = Path(tempfile.mkdtemp(prefix="bench-flux-storage-"))
        self.storage = storage
        port = _free_port()
        self.health = [_free_port(), _free_port()]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": "default"}
        common = ["--events-addr=", "--log-level=info"]
        self.procs = [
            subprocess.Popen(
                [
                    str(source),
                    f"--storage-path={storage}",
                    f"--storage-addr=127.0.0.1:{port}",
                    f"--storage-adv-addr=127.0.0.1:{port}",
                    f"--metrics-addr=127.0.0.1:{_free_port()}",
                    f"--health-addr=127.0.0.1:{self.health[0]}",
                    *common,
                ],
                env=env,
                stdout=(LOGS / "source-controller.log").open("ab"),
                stderr=subprocess.STDOUT,
            ),
            subprocess.Popen(
                [
                    str(kustomize),
                    f"--metrics-addr=127.0.0.1:{_free_port()}",
                    f"--health-addr=127.0.0.1:{self.health[1]}",
                    *common,
                ],
                env=env,
                stdout=(LOGS / "kustomize-controller.log").open("ab"),
                stderr=subprocess.STDOUT,
            ),
        ]
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:

            async def ready() -> bool:
                self.check_alive()
                for port in self.health:
                    try:
                        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                            if r.status != 200:
                                return False
                    except aiohttp.ClientError:
                        return False
                return True

            await until(ready, 120, "the Flux controllers' /readyz")

    async def stop(self) -> None:
        await super().stop()
        shutil.rmtree(self.storage, ignore_errors=True)

    async def create(self, ns: str) -> None:
        meta = {"name": NAME, "namespace": ns}
        await self.client.create(
            GIT_REPOSITORIES,
            {
                "apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "GitRepository",
                "metadata": meta,
                "spec": {"url": self.url, "ref": {"branch": "main"}, "interval": INTERVAL},
            },
            ns,
        )
        await self.client.create(
            KUSTOMIZATIONS,
            {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": meta,
                "spec": {
                    "interval": INTERVAL,
                    "path": "./jobs",
                    "prune": True,
                    "targetNamespace": ns,
                    "sourceRef": {"kind": "GitRepository", "name": NAME},
                },
            },
            ns,
        )

    async def at(self, ns: str, sha: str) -> bool:
        st = (await self.client.get(KUSTOMIZATIONS, NAME, ns)).get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in st.get("conditions") or []
        )
        return ready and str(st.get("lastAppliedRevision", "")).endswith(sha)

    async def _annotate(
        self, resource: resources.Resource, ns: str
    ) -> Callable[[], Awaitable[bool]]:
        token = str(time.time_ns())
        patch = {"metadata": {"annotations": {REQUESTED_AT: token}}}
        await self.client.patch(resource, NAME, patch, ns)

        async def handled() -> bool:
            st = (await self.client.get(resource, NAME, ns)).get("status") or {}
            return bool(st.get("lastHandledReconcileAt") == token)

        return handled

    async def push_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        return await self._annotate(GIT_REPOSITORIES, ns)

    async def full_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        return await self._annotate(KUSTOMIZATIONS, ns)


def _flux_binaries(base: Path) -> tuple[Path, Path]:
    versions = dict(zip(*[iter(flux_versions().split())] * 2, strict=True))
    source = base / f"source-controller-{versions['source-controller']}" / "source-controller"
    kustomize = (
        base / f"kustomize-controller-{versions['kustomize-controller']}" / "kustomize-controller"
    )
    return source, kustomize


def flux_crds() -> list[Path]:
    base = Path(flux_peer("bin"))
    source, kustomize = _flux_binaries(base)
    return sorted((source.parent / "crds").glob("*.yaml")) + sorted(
        (kustomize.parent / "crds").glob("*.yaml")
    )


class Trainops(Side):
    title = "trainops"

    async def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-flux-up-"))
        self.up = bg.Up(
            self.tmp,
            None,
            False,
            kubeconfig=self.kubeconfig,
            flags=["--no-controller", "--no-node", "--allow-reconciler-identity"],
        )
        self.procs = [self.up.proc]
        await self.up.wait_banner()

    async def stop(self) -> None:
        await self.up.stop()
        with contextlib.suppress(OSError):
            LOGS.mkdir(exist_ok=True)
            shutil.copy(self.up.stderr, LOGS / "trainops-up.log")
        shutil.rmtree(self.tmp, ignore_errors=True)
        for kind in (
            resources.MUTATING_WEBHOOK_CONFIGURATIONS,
            resources.VALIDATING_WEBHOOK_CONFIGURATIONS,
        ):
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(kind, WEBHOOK_CONFIGURATION)

    async def create(self, ns: str) -> None:
        await self.client.create(
            JOB_REPOSITORIES,
            {
                "apiVersion": JOB_REPOSITORIES.api_version,
                "kind": JOB_REPOSITORIES.kind,
                "metadata": {"name": NAME, "namespace": ns},
                "spec": {
                    "repoURL": self.url,
                    "path": "jobs",
                    "interval": INTERVAL,
                    "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
                },
            },
            ns,
        )

    async def at(self, ns: str, sha: str) -> bool:
        st = (await self.client.get(JOB_REPOSITORIES, NAME, ns)).get("status") or {}
        sync = st.get("sync") or {}
        return sync.get("status") == "Synced" and sync.get("revision") == sha

    async def _written_after(
        self, ns: str, send: Callable[[], Awaitable[Any]]
    ) -> Callable[[], Awaitable[bool]]:
        rv = (await self.client.get(JOB_REPOSITORIES, NAME, ns))["metadata"]["resourceVersion"]
        await send()

        async def written() -> bool:
            obj = await self.client.get(JOB_REPOSITORIES, NAME, ns)
            return bool(obj["metadata"]["resourceVersion"] != rv)

        return written

    async def push_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        """A push that moved nothing: a round that writes nothing, so its end is the round
        counter (`trainops_gitops_rounds_total`, as Flux's is its status) going up."""
        rounds = 'trainops_gitops_rounds_total{result="success"}'
        before = (await self.up.metrics()).get(rounds, 0.0)
        hook = await self.up.post(
            "/api/v1/webhooks/git", {"repository": self.url, "ref": "refs/heads/main"}
        )
        if not hook.get("refreshed"):
            raise SystemExit(f"the push webhook refreshed {hook}, not {ns}/{NAME}: nothing")

        async def handled() -> bool:
            return (await self.up.metrics()).get(rounds, 0.0) > before

        return handled

    async def full_trigger(self, ns: str) -> Callable[[], Awaitable[bool]]:
        async def send() -> None:
            await self.up.post(f"/api/v1/repositories/{ns}/{NAME}/refresh")

        return await self._written_after(ns, send)
