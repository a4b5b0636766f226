"""GitOps with a hostile repository beside a normal one (issue 29 item 2): the memory the hostile
one adds to the reconciler's process, whether it holds the event loop or the Lease, and whether
the other tenant's push -> applied changes. Results go to docs/PERFORMANCE.md, "A hostile
repository beside a normal one".

    .venv/bin/python benchmarks/bench_gitops_hostile.py [--jobs 1000] [--pushes 5]
        [--hostile-documents 200000] [--no-limits] [--control]

The hostile repository is issue 29's: five files of `---\\n{}\\n` x 200,000 (1,000,000 empty
documents; 196 KB once packed). The normal one holds `--jobs` paused TensorFlowTrainingJobs,
one file each (`bench_gitops_large.make_repository`). The API server is `trainops apiserver`
in its own process; the reconciler (`GitOpsReconciler`, every namespace, the default 2
workers and per-namespace fairness, leader election on a Lease in kube-system, `kube.gcfreeze`
as `trainops gitops` runs it) is in this process, as `trainops gitops` would run it — this
process's RSS is the service's. A thread samples VmRSS every 20 ms (it samples while the loop
is held).

Measured: the normal repository's first sync and push -> applied (a one-file change, pushed,
then the push trigger: until the job has the new value) alone; then the hostile repository is
created in another namespace (interval 1 s, so it is polled again and again) and measured: how
long until its refusal is recorded (its ComparisonError condition), the RSS it adds (the most
sampled while it is polled, less the RSS just before), the event loop's largest stall, the
normal repository's push -> applied meanwhile, and the Lease's transitions (a lost Lease is
taken again: one more transition). `--no-limits` raises every limit out of reach (the code
before the limits; use a smaller `--hostile-documents` unless the machine has GBs to spare).
`--control` puts a benign repository (one paused job) in the hostile one's place, polled as
often: what a second tenant costs anyway, to compare "beside it" with on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_gitops_large import (  # noqa: E402
    GC_FREEZE,
    JOB,
    Heartbeat,
    Shown,
    _git,
    _ms,
    change_one,
    make_repository,
    start_apiserver,
    until,
)
from benchmarks.machine import cpu_model  # noqa: E402
from gitops.engine.limits import Limits  # noqa: E402
from gitops.engine.tenancy import Boundaries  # noqa: E402
from gitops.engine.urls import normalize_repo_url  # noqa: E402
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings  # noqa: E402
from gitops.runtime.reconciler import JOB_REPOSITORIES  # noqa: E402
from gitops.source.pushhooks import PushCheck, PushEvent  # noqa: E402
from kube import resources  # noqa: E402
from kube.client import Client  # noqa: E402
from kube.manager import LeaderElection, Manager  # noqa: E402
from kube.resources import Resource  # noqa: E402

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
OUT_OF_REACH = Limits(files=10**9, documents=10**9, objects=10**9, bytes=10**15, depth=10**6)


class RssSampler:
    """VmRSS of this process every `period` seconds, from a thread (the loop may be held)."""

    def __init__(self, period: float = 0.02) -> None:
        self.period = period
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def reset(self) -> None:
        self.peak = rss_kib()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.peak = max(self.peak, rss_kib())


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def make_hostile(tmp: Path, files: int, documents: int, control: bool) -> tuple[Path, int]:
    """Issue 29's repository (packed, as a Git host stores it), or with `control` one paused
    job: the bare repository and its size on disk."""
    bare, work = tmp / "hostile.git", tmp / "hostile-work"
    run = _git(tmp)
    run("init", "-q", "--bare", "-b", "main", str(bare))
    run("init", "-q", "-b", "main", str(work))
    if control:
        (work / "job.yaml").write_text(JOB.format(i=99999, v=1))
    for i in range(0 if control else files):
        (work / f"f{i}.yaml").write_bytes(b"---\n{}\n" * documents)
    run("add", "-A", cwd=work)
    run("commit", "-q", "-m", "hostile", cwd=work)
    run("push", "-q", bare.as_uri(), "main", cwd=work)
    run("gc", "-q", "--aggressive", cwd=bare)
    size = sum(f.stat().st_size for f in bare.rglob("*") if f.is_file())
    return bare, size


async def pushes(
    running: GitOpsReconciler, client: Client, tmp: Path, jobs: int, n: int, start: int
) -> list[float]:
    """Push -> applied for a one-file change of the normal repository, `n` times."""
    repo = running.repos.get("default", "cms")
    assert repo is not None
    event = PushEvent("generic", (normalize_repo_url(repo["spec"]["repoURL"]),), "main", None)
    times = []
    for k in range(start, start + n):
        i = (k * 7919) % jobs
        value = 10 + k
        change_one(tmp, i, value, "jobs")
        t0 = time.perf_counter()
        await running.push(event, PushCheck.anonymous())

        async def landed(name: str = f"job-{i:05d}", value: int = value) -> bool:
            obj = await client.get(resources.TFJOBS, name, "default")
            return bool(obj["spec"].get("runPolicy", {}).get("backoffLimit") == value)

        await until(landed, 600)
        times.append(time.perf_counter() - t0)
        await asyncio.sleep(3)  # the job event's round (STATUS_DELAY) before the next push
    return times


async def transitions(client: Client) -> int:
    lease = await client.get(LEASES, "trainops-gitops", "kube-system")
    return int((lease.get("spec") or {}).get("leaseTransitions") or 0)


def repository(name: str, namespace: str, url: str, path: str, interval: str) -> dict[str, Any]:
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "repoURL": url,
            "path": path,
            "interval": interval,
            "syncPolicy": {"automated": {"prune": True}},
        },
    }


async def bench(args: argparse.Namespace) -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-hostile-"))
    limits = OUT_OF_REACH if args.no_limits else Limits()
    out: dict[str, str] = Shown(
        **{
            "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "limits": "out of reach (--no-limits)" if args.no_limits else str(limits),
        }
    )
    normal = tmp / "normal"
    normal.mkdir()
    bare, sha = make_repository(normal, args.jobs, "jobs")
    hostile, packed = make_hostile(tmp, 5, args.hostile_documents, args.control)
    what = (
        "control: 1 paused job"
        if args.control
        else f"hostile: 5 files x {args.hostile_documents:,} empty documents"
    )
    out["repositories"] = f"normal: {args.jobs} paused jobs; {what}, {packed / 1024:.0f} KB packed"
    proc, client = await start_apiserver(tmp)
    await client.create(resources.NAMESPACES, {"metadata": {"name": "team-b"}})
    beat = Heartbeat()
    beat.start()
    sampler = RssSampler()
    sampler.start()
    running = GitOpsReconciler(
        Manager(client, leader_election=LeaderElection(), gc_freeze=GC_FREEZE),
        tmp / "cache",
        GitOpsSettings(boundaries=Boundaries.unrestricted(), git_timeout=600, limits=limits),
    )
    running.manager.start()
    try:
        await running.wait_synced(timeout=60)
        await until(lambda: _true(running.is_leader), 60)
        t0 = time.perf_counter()
        await client.create(
            JOB_REPOSITORIES, repository("cms", "default", bare.as_uri(), "cms", "1h")
        )

        async def synced() -> bool:
            obj = await client.get(JOB_REPOSITORIES, "cms", "default")
            st = (obj.get("status") or {}).get("sync") or {}
            return st.get("revision") == sha and st.get("status") == "Synced"

        await until(synced, 3600)
        out["normal: first sync"] = f"{time.perf_counter() - t0:.1f} s"
        await asyncio.sleep(3)
        beat.reset()
        before = await pushes(running, client, normal, args.jobs, args.pushes, 0)
        out["normal alone: push -> applied"] = _ms(before)
        out["loop max gap alone (pushes)"] = f"{beat.max_gap * 1000:.0f} ms"
        leases = await transitions(client)
        await asyncio.sleep(2)
        rss_before = rss_kib()
        sampler.reset()
        beat.reset()
        out["RSS before the hostile repository"] = f"{rss_before / 1024:.1f} MiB"
        t0 = time.perf_counter()
        await client.create(
            JOB_REPOSITORIES, repository("hostile", "team-b", hostile.as_uri(), ".", "1s")
        )

        async def refused() -> dict[str, Any] | None:
            obj = await client.get(JOB_REPOSITORIES, "hostile", "team-b")
            st = obj.get("status") or {}
            for c in st.get("conditions") or []:
                if c.get("type") == "ComparisonError":
                    return c
            return st if (st.get("sync") or {}).get("revision") else None

        result = await until(refused, 3600)
        out["second repository: created -> refused (or synced)"] = (
            f"{time.perf_counter() - t0:.2f} s: {result.get('reason')}: "
            f"{str(result.get('message', result.get('summary')))[:120]}"
        )
        during = await pushes(running, client, normal, args.jobs, args.pushes, args.pushes)
        out["normal beside it: push -> applied"] = _ms(during)
        polled = running.metrics.registry.get_sample_value(
            "trainops_gitops_git_fetch_failures_total"
        )
        out["hostile rounds refused meanwhile"] = f"{polled or 0:.0f}"
        out["RSS added by the hostile repository"] = (
            f"{(sampler.peak - rss_before) / 1024:.1f} MiB at most "
            f"(peak {sampler.peak / 1024:.1f} MiB, now {rss_kib() / 1024:.1f} MiB)"
        )
        out["loop max gap beside it"] = f"{beat.max_gap * 1000:.0f} ms"
        out["Lease transitions beside it"] = (
            f"{await transitions(client) - leases} (still leader: {running.is_leader})"
        )
        out["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return out
    finally:
        await running.manager.stop()
        sampler.stop()
        await beat.stop()
        await client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


async def _true(value: bool) -> bool:
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--hostile-documents", type=int, default=200_000, metavar="N")
    parser.add_argument("--no-limits", action="store_true")
    parser.add_argument("--control", action="store_true")
    parser.add_argument("--keep", action="store_true")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
