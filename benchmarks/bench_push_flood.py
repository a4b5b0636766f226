"""The push hook flooded (issue 29; run by hand; results in docs/PERFORMANCE.md, "The push hook
flooded").

    .venv/bin/python benchmarks/bench_push_flood.py [--duration 40] [--sources 16] [--conns 32]
        [--jobs 20] [--quiet-pushes 4]

`trainops up --repo` runs as its own process (`bench_gitops.Up`: the embedded API server, the
job controller and GitOps in one process, so its RSS and CPU are all of them). Tenant B's
repository is the `--repo` one (namespace default, `--jobs` paused jobs, polled every 10 s);
tenant A's is a JobRepository with one paused job in namespace team-a. Then three phases:

1. quiet: B pushes `--quiet-pushes` real commits; each `git push` is followed by one generic
   push hook from 127.0.0.1, posted once and not retried (as a Git host does), and B's push ->
   applied is measured (until the job carries the new value; a refused hook leaves the poll);
   3 s between pushes, so the round the last job's status change wakes is over (else that
   round, not the hook or the poll, would find the next commit);
2. flood naming A: a second process posts `POST /api/v1/webhooks/git` naming tenant A's
   repository URL as fast as it can for `--duration` s on `--conns` keep-alive connections
   from `--sources` loopback addresses (127.0.0.2 onwards), while B pushes as in 1;
3. flood of random URLs: the same with a new random repository URL in every payload.

Printed per phase: the hook's answers per second by status (202/429/other), the refreshes the
202s reported (each one a refresh request to A's repository), the reconcile rounds the service
ran (`trainops_gitops_rounds`, all repositories: A's and B's polls and B's pushes), the
service's CPU seconds and RSS max, and B's hooks' statuses and push -> applied (p50/max). The
attacker shares the machine's cores with the service: on a CPU-bound machine it cannot post
as fast as a bigger one could, and the figure is what this machine let it post.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_gitops import (  # noqa: E402
    MANIFEST,
    Up,
    _git,
    _job_name,
    _synced,
    _until,
    make_repository,
)
from benchmarks.bench_webhook import _rss_kib  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from gitops.runtime.reconciler import JOB_REPOSITORIES  # noqa: E402
from kube import resources  # noqa: E402
from kube.client import Client  # noqa: E402

HOOK = "/api/v1/webhooks/git"


def attacker(spec: str) -> int:
    """Flood the hook for the spec's duration; print the answers' counts as JSON."""
    import aiohttp

    cfg = json.loads(spec)
    statuses: Counter[str] = Counter()
    refreshed = 0
    errors = 0

    async def one(session: aiohttp.ClientSession, until: float) -> None:
        nonlocal refreshed, errors
        while time.monotonic() < until:
            url = cfg["target"] or f"http://127.0.0.1:1/x/{uuid.uuid4().hex}.git"
            body = {"repository": url, "ref": "refs/heads/main"}
            try:
                async with session.post(cfg["url"] + HOOK, json=body) as r:
                    data = await r.read()
                    statuses[str(r.status)] += 1
                    if r.status == 202:
                        refreshed += int(json.loads(data).get("refreshed", 0))
            except (aiohttp.ClientError, TimeoutError, ValueError):
                errors += 1

    async def run() -> None:
        sources = [f"127.0.0.{2 + i}" for i in range(cfg["sources"])]
        sessions = []
        for i, source in enumerate(sources):
            per = cfg["conns"] // len(sources) + (i < cfg["conns"] % len(sources))
            connector = aiohttp.TCPConnector(limit=max(per, 1), local_addr=(source, 0))
            timeout = aiohttp.ClientTimeout(total=10)
            sessions.append((aiohttp.ClientSession(connector=connector, timeout=timeout), per))
        until = time.monotonic() + cfg["duration"]
        await asyncio.gather(*(one(s, until) for s, per in sessions for _ in range(per)))
        for s, _ in sessions:
            await s.close()

    asyncio.run(run())
    print(json.dumps({"statuses": statuses, "refreshed": refreshed, "errors": errors}))
    return 0


def make_tenant_a(tmp: Path) -> Path:
    """A bare repository with one paused job of namespace team-a."""
    bare, work = tmp / "team-a.git", tmp / "team-a-work"
    for d in (bare, work):
        d.mkdir()
    _git(bare, "init", "-q", "--bare", "-b", "main")
    _git(work, "init", "-q", "-b", "main")
    manifest = MANIFEST.format(name="a-job", backoff=3).replace("default", "team-a")
    (work / "a-job.yaml").write_text(manifest)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "one job")
    _git(work, "push", "-q", bare.as_uri(), "main")
    return bare


class Sampler:
    """The service's VmRSS every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, _rss_kib(self.pid))
            await asyncio.sleep(0.2)

    def reset(self) -> None:
        self.peak = _rss_kib(self.pid)


async def rounds(up: Up) -> float:
    m = await up.metrics()
    return sum(v for k, v in m.items() if k.startswith("trainops_gitops_rounds_total"))


async def b_push(up: Up, work: Path, bare: Path, k: int, jobs: int) -> tuple[int, float]:
    """One real commit of tenant B, pushed, then one hook (not retried): (status, seconds)."""
    assert up.kube is not None and up.http is not None
    kube: Client = up.kube
    name, backoff = _job_name((k * 7) % jobs), 100 + k
    (work / "jobs" / f"{name}.yaml").write_text(MANIFEST.format(name=name, backoff=backoff))
    _git(work, "commit", "-q", "-am", f"{name}: backoffLimit {backoff}")
    sha = _git(work, "rev-parse", "HEAD")
    _git(work, "push", "-q", "origin", "main")
    t0 = time.perf_counter()
    body = {"repository": bare.as_uri(), "ref": "refs/heads/main"}
    async with up.http.post(up.url + HOOK, json=body) as r:
        await r.read()
        status = r.status

    async def applied() -> bool:
        job = await kube.get(resources.TFJOBS, name, "default")
        return (job["spec"].get("runPolicy") or {}).get("backoffLimit") == backoff

    done = await _until(applied, 120, f"{name} backoffLimit {backoff}", 0.02)
    await _until(lambda: _b_synced(up, sha, jobs), 120, f"Synced at {sha[:7]}")
    return status, done - t0


async def _b_synced(up: Up, sha: str, jobs: int) -> bool:
    return _synced(await up.repository(), sha, jobs)


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    return (
        f"p50 {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms "
        f"({len(values)} pushes)"
    )


async def phase(
    up: Up, args: argparse.Namespace, sampler: Sampler, target: str | None, label: str
) -> None:
    """B's pushes, with the attacker flooding meanwhile unless `label` is quiet."""
    work, bare = args.tmp / "work", args.tmp / "jobs.git"
    sampler.reset()
    r0, cpu0, t0 = await rounds(up), up.cpu(), time.perf_counter()
    worker = None
    if label != "quiet":
        spec = {"url": up.url, "sources": args.sources, "conns": args.conns}
        spec |= {"duration": args.duration, "target": target}
        worker = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--attacker", json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await asyncio.sleep(2.0)  # the flood is on
    results: list[tuple[int, float]] = []
    while True:
        results.append(await b_push(up, work, bare, args.k, args.jobs))
        args.k += 1
        await asyncio.sleep(3.0)  # the job event's round (STATUS_DELAY) before the next push
        if worker is None and len(results) >= args.quiet_pushes:
            break
        if worker is not None and time.perf_counter() - t0 > args.duration - 2:
            break
    attack: dict[str, Any] = {}
    if worker is not None:
        stdout, _ = await worker.communicate()
        attack = json.loads(stdout.decode() or "{}")
    wall = time.perf_counter() - t0
    cpu, r1 = up.cpu() - cpu0, await rounds(up)
    print(f"--- {label} ({wall:.0f} s)", flush=True)
    if attack:
        st = attack["statuses"]
        other = sum(v for s, v in st.items() if s not in ("202", "429"))
        d = args.duration
        print(
            f"  hook answered {sum(st.values()) / d:.0f}/s: 202 {st.get('202', 0) / d:.1f}/s, "
            f"429 {st.get('429', 0) / d:.0f}/s, other {other / d:.1f}/s {dict(st)}; "
            f"{attack['errors']} client errors; the 202s reported {attack['refreshed']} "
            f"refreshes"
        )
    print(
        f"  reconcile rounds (all repositories) {r1 - r0:.0f} ({(r1 - r0) / wall:.1f}/s); "
        f"trainops up CPU {cpu:.1f} s ({cpu / wall * 100:.0f}% of one core), "
        f"RSS max {sampler.peak / 1024:.0f} MiB"
    )
    codes = Counter(str(s) for s, _ in results)
    print(
        f"  B: hooks {dict(codes)}; push -> applied {_ms([t for _, t in results])}; "
        f"those with a 202: {_ms([t for s, t in results if s == 202])}",
        flush=True,
    )


async def bench(args: argparse.Namespace) -> None:
    print(
        f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    bare, _, sha = make_repository(args.tmp, args.jobs)
    a_bare = make_tenant_a(args.tmp)
    up = Up(args.tmp, bare, verbose=False)
    try:
        await up.wait_banner()
        await _until(lambda: _b_synced(up, sha, args.jobs), 300, "B synced")
        assert up.kube is not None
        await up.kube.create(resources.NAMESPACES, {"metadata": {"name": "team-a"}})
        await up.kube.create(
            JOB_REPOSITORIES,
            {
                "apiVersion": "gitops.trainops.dev/v1alpha1",
                "kind": "JobRepository",
                "metadata": {"name": "a", "namespace": "team-a"},
                "spec": {
                    "repoURL": a_bare.as_uri(),
                    "path": ".",
                    "interval": "10s",
                    "syncPolicy": {"automated": {"prune": True}},
                },
            },
        )

        async def a_applied() -> bool:
            items = (await up.kube.list(resources.TFJOBS, "team-a")).get("items")  # type: ignore[union-attr]
            return bool(items)

        try:
            await _until(a_applied, 120, "tenant A's job")
        except SystemExit:
            a = await up.kube.get(JOB_REPOSITORIES, "a", "team-a")
            raise SystemExit(f"tenant A's job not applied: {a.get('status')}") from None
        print(
            f"tenants: B {args.jobs} paused jobs (default, the --repo), A 1 paused job "
            f"(team-a); flood: {args.sources} sources, {args.conns} connections, "
            f"{args.duration:g} s per phase",
            flush=True,
        )
        sampler = Sampler(up.proc.pid)
        await asyncio.sleep(3)
        await phase(up, args, sampler, None, "quiet")
        await phase(up, args, sampler, a_bare.as_uri(), "flood naming tenant A's URL")
        await phase(up, args, sampler, "", "flood of random URLs")
        sampler.task.cancel()
        print(
            f"load at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"trainops up CPU in all {up.cpu():.1f} s",
            flush=True,
        )
    finally:
        await up.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=40.0, help="seconds per flood phase")
    parser.add_argument("--sources", type=int, default=16, help="loopback source addresses")
    parser.add_argument("--conns", type=int, default=32, help="attacker connections in all")
    parser.add_argument("--jobs", type=int, default=20, help="tenant B's jobs")
    parser.add_argument("--quiet-pushes", type=int, default=4)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--attacker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attacker:
        return attacker(args.attacker)
    args.tmp, args.k = Path(tempfile.mkdtemp(prefix="bench-push-flood-")), 0
    try:
        asyncio.run(bench(args))
    finally:
        if args.keep:
            print(f"kept {args.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(args.tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
