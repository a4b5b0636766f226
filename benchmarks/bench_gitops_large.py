"""GitOps on a large repository, in process: event-loop responsiveness, status size, no-op
rounds and pushes (issue #17 items 2 and 6). Run by `benchmarks/bench_gitops.py --files N` (or
directly); results go to docs/PERFORMANCE.md, section "GitOps on a large repository".

    .venv/bin/python benchmarks/bench_gitops.py --files 10000 [--refreshes 1]
    .venv/bin/python benchmarks/bench_gitops_large.py 10000 [jobs|configmaps] [pushes]

A bare repository holds N manifests, one file each, 100 per directory under `cms/` — paused
TensorFlowTrainingJobs (default: the kind the reconciler reads from its informer cache) or
ConfigMaps (a kind it lists) — and as many unrelated files under `docs/` (not under `path`:
the reconciler lists only `path`'s files). The API server is `trainops apiserver` in its own
process (so its CPU does not share this process's GIL); the GitOps reconciler (`gitops.runtime.manager.
GitOpsReconciler`, no leader election, its workers running) is in this process's event loop
beside a heartbeat task that sleeps 10 ms and records how late it wakes: the loop's largest
stall while the reconciler works. Every round is timed by wrapping `Reconciler.reconcile`.

Measured, on one prepared repository: the first sync (fetch, read, pre-flight,
compare, N applies, status), forced refreshes (a full comparison of N resources with nothing to
apply, only what changed since the last one is diffed; done when the status write changes
the resourceVersion), no-op poll rounds (the key
added to the work queue, as the interval does: until that round ends, and the round's own
time and CPU), no-op push triggers (`GitOpsReconciler.push` of a push to the branch that moved
nothing: until that round ends), push → applied for a one-file change (a commit changing one
job's `backoffLimit`, pushed, then the push trigger: until the job in the API server has the
new value, and until that round ends), the stored status's size as JSON, the entries the hub
serves, and this process's RSS (the reconciler; git and the API server are other processes).
The reconciler's Manager runs `kube.gcfreeze` as `trainops gitops` does
(`TRAINOPS_BENCH_GC_FREEZE=0`: without it, the interpreter's own full collections).
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
from gitops.engine.tenancy import Boundaries  # noqa: E402
from gitops.engine.urls import normalize_repo_url  # noqa: E402
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings  # noqa: E402
from gitops.runtime.reconciler import JOB_REPOSITORIES  # noqa: E402
from kube import resources  # noqa: E402
from kube.client import Client  # noqa: E402
from kube.gcfreeze import GcFreeze  # noqa: E402
from kube.manager import LeaderElection, Manager  # noqa: E402
from trainops.commands.crds import all_crds  # noqa: E402

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05d}\ndata:\n  v: '{v}'\n"
JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: job-{i:05d}
spec:
  runMode:
    pause:
      enabled: true
  runPolicy:
    backoffLimit: {v}
  replicaSpecs:
    - type: chief
      template:
        spec:
          containers:
            - name: tensorflow
              image: busybox
              command: ["true"]
"""
TEMPLATES = {"jobs": JOB, "configmaps": CM}
GC_FREEZE: GcFreeze | None = (
    None if os.environ.get("TRAINOPS_BENCH_GC_FREEZE") == "0" else GcFreeze()
)
"""As `trainops gitops` runs (its Manager's `kube.gcfreeze` loop); TRAINOPS_BENCH_GC_FREEZE=0:
the interpreter's own collections (the "before" of that change)."""


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


def _git(tmp: Path) -> Callable[..., Any]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return lambda *a, cwd=tmp: subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=b@localhost", *a],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip


def _manifest(work: Path, i: int) -> Path:
    return work / "cms" / f"d{i // 100:03d}" / f"m-{i:05d}.yaml"


def make_repository(tmp: Path, files: int, kind: str) -> tuple[Path, str]:
    bare, work = tmp / "cms.git", tmp / "work"
    run = _git(tmp)
    run("init", "-q", "--bare", "-b", "main", str(bare))
    run("init", "-q", "-b", "main", str(work))
    for i in range(files):
        path = _manifest(work, i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEMPLATES[kind].format(i=i, v=1))
        o = work / "docs" / f"d{i // 100:03d}"
        o.mkdir(parents=True, exist_ok=True)
        (o / f"note-{i:05d}.md").write_text(f"note {i}\n")
    run("add", "-A", cwd=work)
    run("commit", "-q", "-m", f"{files} configmaps", cwd=work)
    run("push", "-q", bare.as_uri(), "main", cwd=work)
    return bare, run("rev-parse", "HEAD", cwd=work).stdout.strip()


def change_one(tmp: Path, i: int, value: int, kind: str) -> str:
    """Commit a change of manifest `i` (its backoffLimit, or its data) and push: the sha."""
    run, work = _git(tmp), tmp / "work"
    _manifest(work, i).write_text(TEMPLATES[kind].format(i=i, v=value))
    run("commit", "-q", "-am", f"change {i} to {value}", cwd=work)
    run("push", "-q", (tmp / "cms.git").as_uri(), "main", cwd=work)
    return str(run("rev-parse", "HEAD", cwd=work).stdout.strip())


class Rounds:
    """Times every `Reconciler.reconcile` call (wall and this process's CPU)."""

    def __init__(self, running: GitOpsReconciler) -> None:
        self.ended: list[tuple[float, float, float]] = []
        """(end time, wall seconds, CPU seconds) of each round."""
        inner = running.reconciler.reconcile

        async def timed(key: str) -> float | None:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return await inner(key)
            finally:
                t1 = time.perf_counter()
                self.ended.append((t1, t1 - t0, time.process_time() - c0))

        running.reconciler.reconcile = timed  # type: ignore[method-assign]

    async def next_after(self, t0: float, timeout: float = 600) -> tuple[float, float, float]:
        deadline = time.monotonic() + timeout
        while True:
            for r in self.ended:
                if r[0] - r[1] >= t0:
                    return r
            if time.monotonic() > deadline:
                raise SystemExit(f"no round within {timeout} s")
            await asyncio.sleep(0.001)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {_pct(values, 0.5) * 1000:.1f} ms, p99 {_pct(values, 0.99) * 1000:.1f} ms, "
        f"max {max(values) * 1000:.1f} ms ({len(values)} runs)"
    )


def _rss() -> str:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return f"{fields['VmRSS'].strip()} (peak {fields['VmHWM'].strip()})"


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


async def bench(
    files: int, refreshes: int, keep: bool, kind: str = "jobs", pushes: int = 5, noops: int = 20
) -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-large-"))
    out: dict[str, str] = Shown(
        **{
            "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "repository": f"{files} {kind} (cms/, path) + {files} other files (docs/)",
        }
    )
    t0 = time.perf_counter()
    bare, sha = make_repository(tmp, files, kind)
    out["repository built"] = f"{time.perf_counter() - t0:.1f} s (not counted)"
    proc, client = await start_apiserver(tmp)
    beat = Heartbeat()
    beat.start()
    running = GitOpsReconciler(
        Manager(client, leader_election=LeaderElection(enabled=False), gc_freeze=GC_FREEZE),
        tmp / "cache",
        GitOpsSettings(
            namespace="default",
            boundaries=Boundaries.unrestricted(),
            git_timeout=600,
        ),
    )
    rounds = Rounds(running)
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

        async def cached_status() -> bool:  # the hub reads the informer's copy
            got = running.repos.get("default", "cms") or {}
            return bool((got.get("status") or {}).get("summary"))

        await until(cached_status, 60)
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
        await noop_rounds(running, rounds, beat, noops, out)
        await push_rounds(running, rounds, client, tmp, files, kind, pushes, out)
        out["reconciler process RSS"] = _rss()
        st = (await client.get(JOB_REPOSITORIES, "cms", "default")).get("status") or {}
        out["stored status size at the end (JSON)"] = (
            f"{len(json.dumps(st, separators=(',', ':'))) / 1024:.1f} KiB"
        )
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


async def noop_rounds(
    running: GitOpsReconciler, rounds: Rounds, beat: Heartbeat, n: int, out: dict[str, str]
) -> None:
    """Poll rounds (the key added to the queue) and push triggers that find nothing changed."""
    from gitops.source.pushhooks import PushCheck, PushEvent

    await asyncio.sleep(3)  # let the job events of the last sync settle (STATUS_DELAY)
    key = "default/cms"
    trigger, own, cpu = [], [], []
    beat.reset()
    for _ in range(n):
        t0 = time.perf_counter()
        running.queue.add(key)
        end, wall, c = await rounds.next_after(t0)
        trigger.append(end - t0)
        own.append(wall)
        cpu.append(c)
    out["no-op poll round: queued -> round done"] = _ms(trigger)
    out["  the round itself"] = _ms(own) + f"; CPU p50 {_pct(cpu, 0.5) * 1000:.1f} ms"
    out["  loop max gap during them"] = f"{beat.max_gap * 1000:.0f} ms"
    repo = running.repos.get("default", "cms")
    assert repo is not None
    event = PushEvent("generic", (normalize_repo_url(repo["spec"]["repoURL"]),), "main", None)
    trigger, own = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        refreshed = await running.push(event, PushCheck.anonymous())
        assert refreshed == [key], refreshed
        end, wall, _c = await rounds.next_after(t0)
        trigger.append(end - t0)
        own.append(wall)
    out["no-op push trigger: push() -> round done"] = _ms(trigger)


async def push_rounds(
    running: GitOpsReconciler,
    rounds: Rounds,
    client: Client,
    tmp: Path,
    files: int,
    kind: str,
    n: int,
    out: dict[str, str],
) -> None:
    """Push → applied for a one-file change, `n` times."""
    from gitops.source.pushhooks import PushCheck, PushEvent

    if n <= 0:
        return
    repo = running.repos.get("default", "cms")
    assert repo is not None
    event = PushEvent("generic", (normalize_repo_url(repo["spec"]["repoURL"]),), "main", None)
    resource = resources.TFJOBS if kind == "jobs" else resources.CONFIGMAPS
    applied, done = [], []
    for k in range(n):
        i = (k * 7919) % files
        name = f"job-{i:05d}" if kind == "jobs" else f"cm-{i:05d}"
        value = 10 + k
        change_one(tmp, i, value, kind)
        t0 = time.perf_counter()
        await running.push(event, PushCheck.anonymous())

        async def landed(name: str = name, value: int = value) -> bool:
            obj = await client.get(resource, name, "default")
            if kind == "jobs":
                return bool(obj["spec"].get("runPolicy", {}).get("backoffLimit") == value)
            return bool(obj.get("data", {}).get("v") == str(value))

        await until(landed, 600)
        applied.append(time.perf_counter() - t0)
        end, _wall, _c = await rounds.next_after(t0)
        done.append(end - t0)
        await asyncio.sleep(3)  # the job event's round (STATUS_DELAY) before the next push
    out["push -> applied (one file changed)"] = _ms(applied)
    out["push -> its round done (status written)"] = _ms(done)


class Shown(dict[str, str]):
    """The results, each printed as soon as it is measured (a long run that fails later
    keeps what it measured)."""

    def __init__(self, **items: str) -> None:
        super().__init__()
        for key, value in items.items():
            self[key] = value

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        print(f"{key:42} {value}", flush=True)


def main(
    files: int = 10000, refreshes: int = 3, keep: bool = False, kind: str = "jobs", pushes: int = 5
) -> None:
    asyncio.run(bench(files, refreshes, keep, kind, pushes))


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 10000,
        kind=sys.argv[2] if len(sys.argv) > 2 else "jobs",
        pushes=int(sys.argv[3]) if len(sys.argv) > 3 else 5,
    )
