"""Benchmark of GitOps on a repository of many job manifests (run by hand; results go to
docs/PERFORMANCE.md, section GitOps). Issue #10 item 14.

    .venv/bin/python benchmarks/bench_gitops.py [--jobs 1000] [--pushes 10] [--refreshes 10]
    .venv/bin/python benchmarks/bench_gitops.py --files 10000 [--refreshes 3]

(`--files`: a large repository, the reconciler in process: benchmarks/bench_gitops_large.py.)

A bare Git repository in a temporary directory holds N TensorFlowTrainingJobs, one file each
under `jobs/`; `trainops up --repo file://…/jobs.git --data-dir <tmp>` runs as its own process
(its CPU from /proc/<pid>/stat), and this script measures it from outside, over the HTTP API
(`DATA_DIR/api.json`) and the API server (`DATA_DIR/kubeconfig`).

Every job is created paused (`spec.runMode.pause.enabled: true`), so the job controller creates
no pods: what is measured is GitOps and the API server, not the process kubelet starting
N × replicas processes.

1. **First sync**: from spawning `trainops up` (and from its banner) until the JobRepository says
   Synced at the pushed commit with N resources (GET /api/v1/repositories/default/jobs every
   50 ms).
2. **No-op resync**, two ways:
   - a *refresh* (POST …/refresh, nothing changed): a forced comparison; done when the
     JobRepository's resourceVersion changes (its status write: `reconciledAt` has whole
     seconds only). Repeated, p50/max;
   - a *poll round* with nothing changed: the reconciler's memo skips everything after
     `git ls-remote` and one list per kind, writing nothing, so nothing observable marks its end.
     Reported: the `git_fetch_duration_seconds` delta (sum/count) and `trainops up`'s CPU over a
     quiet window of several 10 s polls, and the same requests replayed from this process
     (`Git.fetch` on a cache of its own + `LiveReader.probe` without the informer cache,
     i.e. a list by the uid label), timed.
3. **Push → applied**: change one job's `spec.runPolicy.backoffLimit` in one file, commit, push
   to the bare repository, POST a generic push webhook (`/api/v1/webhooks/git`); measured from
   the end of `git push` until the job in the API server carries the new value, and until the
   JobRepository is Synced at the new commit. Repeated, p50/max.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402

from benchmarks.machine import cpu_model  # noqa: E402
from kube import resources  # noqa: E402
from kube.client import Client  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
POLL = 0.05
NAME = "jobs"  # trainops.commands.up_gitops.repository_name("file://…/jobs.git")

MANIFEST = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: {name}
  namespace: default
spec:
  runMode:
    pause:
      enabled: true
  runPolicy:
    backoffLimit: {backoff}
  replicaSpecs:
    - type: chief
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.11.0
              command: ["python3", "-c", "print('{name}')"]
              resources:
                requests: {{cpu: 100m, memory: 128Mi}}
                limits: {{cpu: 500m, memory: 256Mi}}
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.strip()


def _job_name(i: int) -> str:
    return f"job-{i:04d}"


def make_repository(tmp: Path, jobs: int) -> tuple[Path, Path, str]:
    """(bare repository, working clone, commit) with `jobs` manifests under jobs/."""
    bare, work = tmp / "jobs.git", tmp / "work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "jobs").mkdir()
    for i in range(jobs):
        name = _job_name(i)
        (work / "jobs" / f"{name}.yaml").write_text(MANIFEST.format(name=name, backoff=3))
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"{jobs} jobs")
    _git(work, "remote", "add", "origin", bare.as_uri())
    _git(work, "push", "-q", "origin", "main")
    return bare, work, _git(work, "rev-parse", "HEAD")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms, "
        f"min {min(values) * 1000:.0f} ms ({len(values)} runs)"
    )


class Up:
    """`trainops up --repo` as a child process, and clients of its API and API server."""

    def __init__(
        self,
        tmp: Path,
        bare: Path | None,
        verbose: bool,
        *,
        flags: Sequence[str] = (),
        kubeconfig: Path | None = None,
    ) -> None:
        """`up --repo BARE` (no --repo when `bare` is None) with `flags` added; with
        `kubeconfig`, on that cluster (`--kubeconfig`) instead of the embedded API server."""
        self.data_dir = tmp / "data"
        self.stdout = tmp / "up.out"
        self.stderr = tmp / "up.err"
        self.kubeconfig = kubeconfig or self.data_dir / "kubeconfig"
        cmd = [sys.executable, "-m", "trainops", "up"]
        cmd += ["--repo", bare.as_uri()] if bare is not None else []
        cmd += ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else []
        cmd += ["--data-dir", str(self.data_dir), *flags] + (["--verbose"] if verbose else [])
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=self.stdout.open("wb"), stderr=self.stderr.open("wb")
        )
        self.banner: float | None = None
        self.url = ""
        self.http: aiohttp.ClientSession | None = None
        self.kube: Client | None = None

    def cpu(self) -> float:
        return _cpu_seconds(self.proc.pid)

    async def wait_banner(self) -> None:
        deadline = time.monotonic() + 120
        while b"trainops is up" not in self.stdout.read_bytes():
            if self.proc.poll() is not None:
                raise SystemExit(f"trainops up exited with {self.proc.returncode}: "
                                 + self.stderr.read_text()[-2000:])  # fmt: skip
            if time.monotonic() > deadline:
                raise SystemExit("trainops up did not start within 120 s")
            await asyncio.sleep(0.02)
        self.banner = time.perf_counter()
        address = json.loads((self.data_dir / "api.json").read_text())
        self.url = address["url"]
        self.http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {address['token']}"})
        self.kube = await Client.connect(self.kubeconfig, timeout=60)

    async def repository(self) -> dict[str, Any]:
        assert self.http is not None
        async with self.http.get(f"{self.url}/api/v1/repositories/default/{NAME}") as r:
            if r.status == 404:
                return {}
            r.raise_for_status()
            return await r.json()

    async def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.http is not None
        async with self.http.post(f"{self.url}{path}", json=body) as r:
            if r.status >= 300:
                raise SystemExit(f"POST {path}: {r.status} {await r.text()}")
            return await r.json()

    async def metrics(self) -> dict[str, float]:
        assert self.http is not None
        async with self.http.get(f"{self.url}/metrics") as r:
            text = await r.text()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("trainops_gitops_") and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.close()
        if self.kube is not None:
            await self.kube.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _synced(repo: dict[str, Any], sha: str, n: int) -> bool:
    st = repo.get("status") or {}
    sync = st.get("sync") or {}
    return (
        sync.get("status") == "Synced"
        and sync.get("revision") == sha
        and len(st.get("resources") or []) == n
    )


async def _until(predicate: Any, timeout: float, what: str, interval: float = POLL) -> float:
    """Poll the async `predicate` until true; the perf_counter time it was first seen true."""
    deadline = time.monotonic() + timeout
    while True:
        if await predicate():
            return time.perf_counter()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


async def _quiet(up: Up, seconds: float = 4.0, timeout: float = 180.0) -> float:
    """Wait until the JobRepository's resourceVersion has not changed for `seconds` (the job
    controller's status writes on the paused jobs wake the repository for a while)."""
    deadline = time.monotonic() + timeout
    rv, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now_rv = ((await up.repository()).get("metadata") or {}).get("resourceVersion")
        if now_rv != rv:
            rv, since = now_rv, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return time.monotonic() - since
        await asyncio.sleep(0.25)
    raise SystemExit("the repository never went quiet")


async def first_sync(up: Up, sha: str, jobs: int, out: dict[str, str]) -> None:
    await up.wait_banner()
    assert up.banner is not None
    out["up → banner"] = f"{up.banner - up.started:.1f} s"
    seen = await _until(
        lambda: _aseen(up, sha, jobs), 600, f"Synced at {sha[:7]} with {jobs} resources"
    )
    cpu = up.cpu()
    out["first sync: spawn → Synced"] = (
        f"{seen - up.started:.1f} s (banner → Synced {seen - up.banner:.1f} s); "
        f"trainops up CPU {cpu:.1f} s in all (start-up included)"
    )
    jobs_seen = await up.kube.list(resources.TFJOBS, "default")  # type: ignore[union-attr]
    out["jobs in the API server"] = str(len(jobs_seen.get("items") or []))
    m = await up.metrics()
    out["first sync: metrics"] = (
        f"sync_duration sum {m.get('trainops_gitops_sync_duration_seconds_sum', 0):.1f} s over "
        f"{m.get('trainops_gitops_sync_duration_seconds_count', 0):.0f}; git fetch sum "
        f"{m.get('trainops_gitops_git_fetch_duration_seconds_sum', 0):.2f} s over "
        f"{m.get('trainops_gitops_git_fetch_duration_seconds_count', 0):.0f}"
    )
    cpu0, t0 = up.cpu(), time.perf_counter()
    waited = await _quiet(up)
    t1, cpu1 = time.perf_counter(), up.cpu()
    for _ in range(20):
        await up.repository()
    out["cost of one poll of the repository (GET)"] = (
        f"{(time.perf_counter() - t1) / 20 * 1000:.0f} ms wall, "
        f"{(up.cpu() - cpu1) / 20 * 1000:.0f} ms of trainops up CPU (the status lists {jobs} resources)"
    )
    out["settling after Synced"] = (
        f"{t1 - t0 - waited:.1f} s until the repository stopped changing, "
        f"trainops up CPU {cpu1 - cpu0:.1f} s (the controller marks {jobs} jobs paused, "
        "each status change wakes the repository)"
    )


async def _aseen(up: Up, sha: str, jobs: int) -> bool:
    return _synced(await up.repository(), sha, jobs)


async def refreshes(up: Up, n: int, out: dict[str, str]) -> None:
    times: list[float] = []
    m0, cpu0 = await up.metrics(), up.cpu()
    for _ in range(n):
        rv = ((await up.repository()).get("metadata") or {}).get("resourceVersion")
        t0 = time.perf_counter()
        await up.post(f"/api/v1/repositories/default/{NAME}/refresh")

        async def changed(rv: Any = rv) -> bool:
            return ((await up.repository()).get("metadata") or {}).get("resourceVersion") != rv

        times.append(await _until(changed, 60, "the refresh's status write") - t0)
        await asyncio.sleep(1.1)  # a new second for reconciledAt
    m1, cpu = await up.metrics(), up.cpu() - cpu0
    out["no-op refresh → status written"] = _ms(times)
    out["no-op refresh: CPU per refresh"] = f"{cpu / n * 1000:.0f} ms (trainops up, incl. polling)"
    out["no-op refresh: git fetch (ls-remote)"] = _hist_delta(
        m0, m1, "trainops_gitops_git_fetch_duration_seconds"
    )


def _hist_delta(m0: dict[str, float], m1: dict[str, float], name: str) -> str:
    count = m1.get(name + "_count", 0) - m0.get(name + "_count", 0)
    total = m1.get(name + "_sum", 0) - m0.get(name + "_sum", 0)
    return f"mean {total / count * 1000:.0f} ms over {count:.0f}" if count else "none"


async def poll_rounds(up: Up, bare: Path, tmp: Path, jobs: int, out: dict[str, str]) -> None:
    """Skipped rounds: measured by their traces (metrics, CPU) and by replaying their requests."""
    from gitops.engine.pairing import key_of
    from gitops.runtime.discovery import Discovery
    from gitops.runtime.livestate import LiveReader
    from gitops.runtime.reconciler import DEFAULT_KINDS, JOB_REPOSITORIES
    from gitops.source.git import Git

    window = 30.0
    m0, cpu0 = await up.metrics(), up.cpu()
    await asyncio.sleep(window)  # three 10 s polls, nothing to do
    m1, cpu = await up.metrics(), up.cpu() - cpu0
    name = "trainops_gitops_git_fetch_duration_seconds"
    rounds = m1.get(name + "_count", 0) - m0.get(name + "_count", 0)
    out["poll round (skipped): git fetch"] = _hist_delta(m0, m1, name)
    out["poll round (skipped): CPU"] = (
        f"{cpu:.2f} s of trainops up in {window:.0f} s idle with {rounds:.0f} poll rounds "
        f"({cpu / max(rounds, 1) * 1000:.0f} ms per round, idle loops included)"
    )
    # Replay: the same requests from this process.
    assert up.kube is not None
    git = Git(tmp / "replay-git", timeout=60)
    reader = LiveReader(up.kube, Discovery(up.kube))  # no cache: lists by the uid label
    repo = await up.kube.get(JOB_REPOSITORIES, NAME, "default")
    uid = str(repo["metadata"]["uid"])
    desired = [
        key_of({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "TensorFlowTrainingJob",
                "metadata": {"name": _job_name(i), "namespace": "default"}}, "default")
        for i in range(jobs)
    ]  # fmt: skip
    kinds = set(DEFAULT_KINDS)
    await git.fetch(bare.as_uri(), None, None)  # fill the cache, as the real one is
    fetch_t, live_t = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        await git.fetch(bare.as_uri(), None, None)
        t1 = time.perf_counter()
        live = (await reader.probe(f"default/{NAME}", uid, kinds, desired, scope=None)).objects
        t2 = time.perf_counter()
        fetch_t.append(t1 - t0)
        live_t.append(t2 - t1)
    out["poll round replayed: ls-remote"] = _ms(fetch_t)
    out["poll round replayed: live lists (no cache)"] = _ms(live_t) + f", {len(live)} objects"
    out["poll round replayed: total"] = _ms([a + b for a, b in zip(fetch_t, live_t, strict=True)])


async def pushes(up: Up, work: Path, n: int, jobs: int, out: dict[str, str]) -> None:
    assert up.kube is not None
    applied, synced, push_t, cpus = [], [], [], []
    m0 = await up.metrics()
    for k in range(n):
        name = _job_name((k * 97) % jobs)
        backoff = 10 + k
        (work / "jobs" / f"{name}.yaml").write_text(MANIFEST.format(name=name, backoff=backoff))
        _git(work, "commit", "-q", "-am", f"{name}: backoffLimit {backoff}")
        sha = _git(work, "rev-parse", "HEAD")
        cpu0 = up.cpu()
        tp = time.perf_counter()
        _git(work, "push", "-q", "origin", "main")
        t0 = time.perf_counter()
        push_t.append(t0 - tp)
        hook = await up.post(
            "/api/v1/webhooks/git",
            {"repository": (work.parent / "jobs.git").as_uri(), "ref": "refs/heads/main"},
        )
        if hook.get("refreshed") != 1:
            raise SystemExit(f"the webhook refreshed {hook}")

        async def job_applied(name: str = name, backoff: int = backoff) -> bool:
            job = await up.kube.get(resources.TFJOBS, name, "default")  # type: ignore[union-attr]
            return (job["spec"].get("runPolicy") or {}).get("backoffLimit") == backoff

        async def repo_synced(sha: str = sha) -> bool:
            return _synced(await up.repository(), sha, jobs)

        ta = await _until(job_applied, 60, f"{name} backoffLimit {backoff}", 0.02)
        ts = await _until(repo_synced, 60, f"Synced at {sha[:7]}")
        cpus.append(up.cpu() - cpu0)
        applied.append(ta - t0)
        synced.append(ts - t0)
        await _quiet(up, 3.0)
    m1 = await up.metrics()
    out["git push (not counted)"] = _ms(push_t)
    out["push → job applied"] = _ms(applied)
    out["push → repository Synced"] = _ms(synced)
    out["push: trainops up CPU per push"] = (
        f"p50 {statistics.median(cpus):.2f} s, max {max(cpus):.2f} s (until Synced, polling incl.)"
    )
    out["push: git fetch + checkout + load, all rounds"] = _hist_delta(
        m0, m1, "trainops_gitops_git_fetch_duration_seconds"
    )
    out["push: sync operation (apply)"] = _hist_delta(
        m0, m1, "trainops_gitops_sync_duration_seconds"
    )


async def bench(args: argparse.Namespace) -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-"))
    out: dict[str, str] = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "repository": f"{args.jobs} TensorFlowTrainingJobs (one chief each, created paused: "
        "no pods), one file each under jobs/, bare repository on file://",
    }
    t0 = time.perf_counter()
    bare, work, sha = make_repository(tmp, args.jobs)
    out["repository built"] = f"{time.perf_counter() - t0:.1f} s (not counted)"
    up = Up(tmp, bare, args.verbose)
    try:
        await first_sync(up, sha, args.jobs, out)
        _print_so_far(out)
        if args.refreshes:
            await refreshes(up, args.refreshes, out)
        if not args.no_poll:
            await poll_rounds(up, bare, tmp, args.jobs, out)
        if args.pushes:
            await pushes(up, work, args.pushes, args.jobs, out)
        out["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        out["trainops up CPU in all"] = f"{up.cpu():.1f} s"
        return out
    finally:
        await up.stop()
        if args.keep:
            print(f"kept {tmp} (trainops up's log: {up.stderr})", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


_printed: set[str] = set()


def _print_so_far(out: dict[str, str]) -> None:
    for key, value in out.items():
        if key not in _printed:
            print(f"{key:46} {value}", flush=True)
            _printed.add(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pushes", type=int, default=10)
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--no-poll", action="store_true", help="skip the idle poll-round window")
    parser.add_argument(
        "--verbose", action="store_true", help="trainops up --verbose (its log kept)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--files",
        type=int,
        help="instead: a repository of this many ConfigMap files, the reconciler in process "
        "(loop max gap, status size; benchmarks/bench_gitops_large.py)",
    )
    args = parser.parse_args()
    if args.files:
        from benchmarks import bench_gitops_large

        bench_gitops_large.main(args.files, args.refreshes, args.keep)
        return
    if args.verbose:
        args.keep = True
    out = asyncio.run(bench(args))
    _print_so_far(out)


if __name__ == "__main__":
    main()
