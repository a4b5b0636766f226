"""GitOps on a large repository, in process: event-loop responsiveness and status size (issue
#17 item 2). Run by `benchmarks/bench_gitops.py --files N` (or directly); results go to
docs/PERFORMANCE.md, section "GitOps on a large repository".

    .venv/bin/python benchmarks/bench_gitops.py --files 10000 [--refreshes 3]

A bare repository holds N ConfigMaps, one file each, 100 per directory under `cms/`, and as
many unrelated files under `docs/` (not under `path`: the sparse checkout skips them). The API
server is `trainops apiserver` in its own process (so its CPU does not share this process's
GIL); the GitOps reconciler (`gitops.manager.GitOpsReconciler`, no leader election) runs in
this process's event loop beside a heartbeat task that sleeps 10 ms and records how late it
wakes: the loop's largest stall while the reconciler works.

Measured: the first sync (fetch, checkout, load, pre-flight, compare, N applies, status), a
forced refresh (a full comparison of N resources with nothing to apply; done when the status
write changes the resourceVersion), a poll round with nothing changed (`reconcile` called
directly: memo hit), the size of the stored status as JSON, and the entries the hub serves.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_model  # noqa: E402
from gitops.manager import GitOpsReconciler, GitOpsSettings  # noqa: E402
from gitops.reconciler import JOB_REPOSITORIES  # noqa: E402
from gitops.tenancy import Boundaries  # noqa: E402
from kube import resources  # noqa: E402
from kube.client import Client  # noqa: E402
from kube.manager import LeaderElection, Manager  # noqa: E402
from trainops.commands.crds import all_crds  # noqa: E402

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05d}\ndata:\n  v: '{v}'\n"


class Heartbeat:
    """Sleeps `period` seconds in a loop; `max_gap` is the largest lateness since `reset`."""

    def __init__(self, period: float = 0.01) -> None:
        self.period = period
        self.max_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def reset(self) -> None:
        self.max_gap = 0.0

    async def _run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(self.period)
            self.max_gap = max(self.max_gap, time.perf_counter() - t - self.period)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def make_repository(tmp: Path, files: int) -> tuple[Path, str]:
    bare, work = tmp / "cms.git", tmp / "work"
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    run: Callable[..., Any] = lambda *a, cwd=tmp: subprocess.run(  # noqa: E731
        ["git", "-c", "user.name=bench", "-c", "user.email=b@localhost", *a],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    run("init", "-q", "--bare", "-b", "main", str(bare))
    run("init", "-q", "-b", "main", str(work))
    for i in range(files):
        d = work / "cms" / f"d{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"cm-{i:05d}.yaml").write_text(CM.format(i=i, v=1))
        o = work / "docs" / f"d{i // 100:03d}"
        o.mkdir(parents=True, exist_ok=True)
        (o / f"note-{i:05d}.md").write_text(f"note {i}\n")
    run("add", "-A", cwd=work)
    run("commit", "-q", "-m", f"{files} configmaps", cwd=work)
    run("push", "-q", bare.as_uri(), "main", cwd=work)
    return bare, run("rev-parse", "HEAD", cwd=work).stdout.strip()


async def start_apiserver(tmp: Path) -> tuple[subprocess.Popen[bytes], Client]:
    data = tmp / "api"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(data)],
        cwd=REPO, stdout=(tmp / "api.out").open("wb"), stderr=(tmp / "api.err").open("wb"),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise SystemExit("trainops apiserver exited: " + (tmp / "api.err").read_text()[-2000:])
        if (data / "kubeconfig").exists():
            try:
                client = await Client.connect(data / "kubeconfig", timeout=60)
                await client.list(resources.NAMESPACES)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        await asyncio.sleep(0.2)
    for crd in all_crds():
        await client.create(resources.CRDS, crd)
    for crd in all_crds():
        name = str(crd["metadata"]["name"])

        async def established(name: str = name) -> bool:
            return await _established(client, name)

        await until(established, 60)
    return proc, client


async def _established(client: Client, name: str) -> bool:
    obj = await client.get(resources.CRDS, name)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def until(check: Callable[[], Awaitable[Any]], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise SystemExit(f"not done within {timeout} s")
        await asyncio.sleep(0.05)


async def bench(files: int, refreshes: int, keep: bool) -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-large-"))
    out: dict[str, str] = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "repository": f"{files} ConfigMaps (cms/, path) + {files} other files (docs/)",
    }
    t0 = time.perf_counter()
    bare, sha = make_repository(tmp, files)
    out["repository built"] = f"{time.perf_counter() - t0:.1f} s (not counted)"
    proc, client = await start_apiserver(tmp)
    beat = Heartbeat()
    beat.start()
    running = GitOpsReconciler(
        Manager(client, leader_election=LeaderElection(enabled=False)),
        tmp / "cache",
        GitOpsSettings(
            namespace="default",
            boundaries=Boundaries.unrestricted(),
            git_timeout=600,
        ),
    )
    running.manager.start()
    try:
        await running.wait_synced(timeout=60)
        body = {
            "apiVersion": "gitops.trainops.dev/v1alpha1",
            "kind": "JobRepository",
            "metadata": {"name": "cms", "namespace": "default"},
            "spec": {
                "repoURL": bare.as_uri(),
                "path": "cms",
                "interval": "1h",
                "syncPolicy": {"automated": {}},
            },
        }
        beat.reset()
        t0 = time.perf_counter()
        await client.create(JOB_REPOSITORIES, body)

        async def synced() -> dict[str, Any] | None:
            obj = await client.get(JOB_REPOSITORIES, "cms", "default")
            st = obj.get("status") or {}
            ok = (st.get("sync") or {}).get("revision") == sha
            return obj if ok and (st.get("sync") or {}).get("status") == "Synced" else None

        obj = await until(synced, 3600)
        out["first sync (N applies)"] = f"{time.perf_counter() - t0:.1f} s"
        out["  loop max gap during it"] = f"{beat.max_gap * 1000:.0f} ms"
        st = obj["status"]
        out["stored status size (JSON)"] = (
            f"{len(json.dumps(st, separators=(',', ':'))) / 1024:.1f} KiB, "
            f"{len(st.get('resources') or [])} entries listed, summary {st.get('summary')}"
        )
        t0 = time.perf_counter()
        served = running.repository("default", "cms")
        out["hub serves (GET repository)"] = (
            f"{len(served['status']['resources'])} entries in "
            f"{(time.perf_counter() - t0) * 1000:.0f} ms"
        )
        times, gaps = [], []
        for _ in range(refreshes):
            await asyncio.sleep(1.1)  # reconciledAt has whole seconds
            rv = (await client.get(JOB_REPOSITORIES, "cms", "default"))["metadata"]
            beat.reset()
            t0 = time.perf_counter()
            await running.refresh("default", "cms")

            async def written(rv: str = rv["resourceVersion"]) -> bool:
                obj = await client.get(JOB_REPOSITORIES, "cms", "default")
                return bool(obj["metadata"]["resourceVersion"] != rv)

            await until(written, 600)
            times.append(time.perf_counter() - t0)
            gaps.append(beat.max_gap)
        if times:
            out["forced refresh (full compare, no apply)"] = (
                f"p50 {sorted(times)[len(times) // 2]:.2f} s, max {max(times):.2f} s "
                f"({len(times)} runs)"
            )
            out["  loop max gap during the refreshes"] = f"{max(gaps) * 1000:.0f} ms"
        rounds = []
        beat.reset()
        for _ in range(3):
            t0 = time.perf_counter()
            await running.reconciler.reconcile("default/cms")
            rounds.append(time.perf_counter() - t0)
        out["no-op poll round (memo hit)"] = (
            f"p50 {sorted(rounds)[1]:.2f} s, max {max(rounds):.2f} s (3 runs)"
        )
        out["  loop max gap during the poll rounds"] = f"{beat.max_gap * 1000:.0f} ms"
        out["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return out
    finally:
        await running.manager.stop()
        await beat.stop()
        await client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(files: int = 10000, refreshes: int = 3, keep: bool = False) -> None:
    for key, value in asyncio.run(bench(files, refreshes, keep)).items():
        print(f"{key:42} {value}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10000)
