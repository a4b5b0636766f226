"""trainops GitOps side by side with Flux (source-controller + kustomize-controller) on the same
kube-apiserver and the same Git repository (issue #17 item 6; run by hand, results go to
docs/PERFORMANCE.md, section "Side by side with Flux").

One command (builds Flux once into ~/.cache/trainops/flux/ with `hack/flux-peer build`, starts
a reference control plane of its own with `hack/reference-cluster start`, stops it at the end):

    .venv/bin/python benchmarks/bench_flux.py [--jobs 1000] [--rounds 3] [--pushes 5] [--noops 5]
                                              [--poll 0.02]

or on a reference cluster already running: `--kubeconfig /tmp/ref-flux/kubeconfig`; `--only
trainops` (or `flux`) measures one side. The controllers' logs go to /tmp/bench-flux-logs/.
`--poll` is how often a trigger's end is checked: on a quiet machine both sides' no-op triggers
end within the default 20 ms, so both read 27–30 ms; `--poll 0.002` tells them apart, at the
cost of a check every 2 ms on each side (a metrics scrape of ours, a GET of Flux's object).

The repository: N TensorFlowTrainingJobs (benchmarks/bench_gitops.py's manifest without its
namespace, created paused), one file each under `jobs/`, in a bare repository served over smart
HTTP on loopback (`git http-backend`, tests/support/githttp.py). Every measurement gets a fresh
namespace, deleted afterwards, and fresh controller processes:

- **Flux**: source-controller v1.9.0 (artifact server on loopback, storage in a temporary
  directory, `--storage-adv-addr`) and kustomize-controller v1.9.6, defaults otherwise (no
  leader election); a GitRepository (branch main, interval 10m) and a Kustomization (path
  ./jobs, prune, targetNamespace the run's namespace, interval 10m) in that namespace.
- **trainops**: `trainops up --kubeconfig K --no-controller --no-node
  --allow-reconciler-identity` (GitOps, its HTTP API and the admission webhook; no job
  controller, as Flux has none), and a JobRepository (path jobs, interval 10m, automated sync
  with prune and selfHeal, as `up --repo` writes) in that namespace.

The two alternate, the order flipping every round. For each: first sync (object created →
all N jobs applied and the repository/Kustomization reports the commit), API requests
during it (kube-apiserver's `apiserver_request_total` less the requests this script sent: its
polling and metric scrapes); a **no-op trigger** (Flux: annotate the GitRepository with
`reconcile.fluxcd.io/requestedAt`, done when its `status.lastHandledReconcileAt` says so;
ours: a push webhook for the same URL, done when the round counter `trainops_gitops_rounds_total`
goes up: a no-op round writes nothing), its controller CPU and API requests until handled
(at least 1.5 s); a **forced full reconcile with nothing changed** (Flux: the same annotation
on the Kustomization; ours: POST …/refresh); **push → applied** for a one-file change (one
job's `backoffLimit`; from the end of `git push`, trigger as above, until the job in the API
server carries the new value, and until the repository/Kustomization reports the new commit);
the controllers' RSS at the end (Flux: both processes added up) and their peak (VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import bench_controller as bc  # noqa: E402
from benchmarks import bench_gitops as bg  # noqa: E402
from benchmarks.flux_sides import (  # noqa: E402
    POLL,
    Flux,
    Side,
    Trainops,
    flux_crds,
    flux_peer,
    flux_versions,
    until,
)
from benchmarks.machine import cpu_model  # noqa: E402
from kube import errors, resources  # noqa: E402
from kube.client import Client  # noqa: E402
from tests.support.githttp import serve_git_http  # noqa: E402

PUSHES = itertools.count()


class Counting:
    """A Client that counts the requests it sends: the bench's own (its polling, the metrics
    scrapes), taken out of kube-apiserver's totals."""

    _COUNTED = frozenset({"get", "list", "create", "patch", "delete", "request"})

    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name not in self._COUNTED:
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await attr(*args, **kwargs)

        return counted


async def requests_total(client: Any) -> float:
    """kube-apiserver's request count so far, less the ones this bench sent (`Counting`)."""
    calls = client.calls
    served = sum((await bc._apiserver_requests(client)).values())
    return served - calls


# --- one measurement ------------------------------------------------------------------------


@dataclass
class Figures:
    first_sync: float = 0.0
    first_sync_requests: float = 0.0
    first_sync_cpu: float = 0.0
    noop: list[float | None] = field(default_factory=list)
    noop_cpu: list[float] = field(default_factory=list)
    noop_requests: list[float] = field(default_factory=list)
    full: list[float | None] = field(default_factory=list)
    full_cpu: list[float] = field(default_factory=list)
    full_requests: list[float] = field(default_factory=list)
    applied: list[float] = field(default_factory=list)
    synced: list[float] = field(default_factory=list)
    push_cpu: list[float] = field(default_factory=list)
    push_requests: list[float] = field(default_factory=list)
    rss: float = 0.0
    hwm: float = 0.0
    load: float = 0.0


async def measure(side: Side, args: argparse.Namespace, sha: str, tag: str) -> Figures:
    client = side.client
    ns = f"flux-bench-{tag}-{int(time.time() * 1000) % 10**8}"
    await client.create(
        resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    f = Figures(load=os.getloadavg()[0])
    await side.start()
    try:
        await asyncio.sleep(2)  # informers listed and watching (neither side logs it)
        side.check_alive()
        r0, c0, t0 = await requests_total(client), side.cpu(), time.perf_counter()
        await side.create(ns)

        async def first() -> bool:
            if not await side.at(ns, sha):
                side.check_alive()
                return False
            jobs = await client.list(resources.TFJOBS, ns)
            return len(jobs.get("items") or []) == args.jobs

        t1 = await until(first, 1800, f"{side.title}: first sync of {args.jobs} jobs")
        f.first_sync, f.first_sync_cpu = t1 - t0, side.cpu() - c0
        f.first_sync_requests = await requests_total(client) - r0
        print(f"  {side.title}: first sync {f.first_sync:.1f} s", file=sys.stderr, flush=True)
        await asyncio.sleep(3)  # let status writes and watch events after the sync settle
        for _ in range(args.noops):
            await _triggered(side, side.push_trigger, ns, 10, f.noop, f.noop_cpu, f.noop_requests)
        for _ in range(args.noops):
            await _triggered(side, side.full_trigger, ns, 900, f.full, f.full_cpu, f.full_requests)
        work = side.work
        for _ in range(args.pushes):
            k = next(PUSHES)  # across rounds and sides: every push changes the file
            name = bg._job_name((k * 97 + 13) % args.jobs)
            backoff = 100 + k
            (work / "jobs" / f"{name}.yaml").write_text(_manifest(name, backoff))
            bg._git(work, "commit", "-q", "-am", f"{name}: backoffLimit {backoff}")
            new = bg._git(work, "rev-parse", "HEAD")
            bg._git(work, "push", "-q", "origin", "main")
            r0, c0, t0 = await requests_total(client), side.cpu(), time.perf_counter()
            await side.push_trigger(ns)

            async def applied(name: str = name, backoff: int = backoff) -> bool:
                job = await client.get(resources.TFJOBS, name, ns)
                return (job["spec"].get("runPolicy") or {}).get("backoffLimit") == backoff

            async def at(new: str = new) -> bool:
                return await side.at(ns, new)

            ta = await until(applied, 900, f"{side.title}: {name} backoffLimit {backoff}")
            ts = await until(at, 900, f"{side.title}: at {new[:7]}")
            f.applied.append(ta - t0)
            f.synced.append(ts - t0)
            await asyncio.sleep(1.5)  # its status writes after the apply
            f.push_cpu.append(side.cpu() - c0)
            f.push_requests.append(await requests_total(client) - r0)
        f.rss, f.hwm = side.rss()
        print(f"  {side.title}: {f}", file=sys.stderr, flush=True)
        return f
    finally:
        await _delete_namespace(client, ns)
        await side.stop()


def _manifest(name: str, backoff: int) -> str:
    return bg.MANIFEST.format(name=name, backoff=backoff).replace("  namespace: default\n", "")


async def _triggered(
    side: Side,
    trigger: Callable[[str], Awaitable[Callable[[], Awaitable[bool]]]],
    ns: str,
    timeout: float,
    times: list[float | None],
    cpus: list[float],
    requests: list[float],
) -> None:
    """One trigger with nothing changed: its time to handled (None if no end was seen within
    `timeout`: nothing observable), the controllers' CPU and the API requests until then, at
    least 1.5 s (the writes and events that follow)."""
    await asyncio.sleep(1.1)  # a new second: our status' reconciledAt has whole seconds
    r0, c0, t0 = await requests_total(side.client), side.cpu(), time.perf_counter()
    done = await trigger(ns)
    try:
        times.append(await until(done, timeout, "the trigger to be handled") - t0)
    except SystemExit:
        times.append(None)
    await asyncio.sleep(max(0.0, t0 + 1.5 - time.perf_counter()))
    cpus.append(side.cpu() - c0)
    requests.append(await requests_total(side.client) - r0)


async def _delete_namespace(client: Client, name: str) -> None:
    with contextlib.suppress(errors.NotFound):
        await client.delete(resources.NAMESPACES, name)

    async def gone() -> bool:
        try:
            await client.get(resources.NAMESPACES, name)
        except errors.NotFound:
            return True
        return False

    await until(gone, 600, f"namespace {name} deleted")


# --- the table ------------------------------------------------------------------------------


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def table(rows: dict[str, list[Figures]], titles: dict[str, str]) -> list[str]:
    names = list(rows)

    def per_round(fn: Callable[[Figures], str]) -> str:
        return " | ".join(" / ".join(fn(f) for f in rows[n]) for n in names)

    def pooled(fn: Callable[[list[Figures]], str]) -> str:
        return " | ".join(fn(rows[n]) for n in names)

    def all_of(fs: list[Figures], attr: str) -> list[float]:
        return [v for f in fs for v in getattr(f, attr) if v is not None]

    def latency(attr: str) -> Callable[[list[Figures]], str]:
        def cell(fs: list[Figures]) -> str:
            values = all_of(fs, attr)
            if not values:
                return "no end seen"
            return f"{_p(values, 0.5):.2f} s / {_p(values, 0.99):.2f} s ({len(values)})"

        return cell

    def median(attr: str, scale: float = 1.0) -> Callable[[list[Figures]], str]:
        return lambda fs: f"{statistics.median(all_of(fs, attr)) * scale:.0f}"

    def noop(fs: list[Figures]) -> str:
        values = [v for f in fs for v in f.noop]
        seen = [v for v in values if v is not None]
        text = f"{statistics.median(seen) * 1000:.0f} ms" if seen else "no end seen"
        missing = len(values) - len(seen)
        return text + (f" ({missing} of {len(values)} with no status write)" if missing else "")

    lines = [
        "| figure | " + " | ".join(titles[n] for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
        f"| first sync, s (per round) | {per_round(lambda f: f'{f.first_sync:.1f}')} |",
        "| first sync: controller CPU, s (per round) | "
        f"{per_round(lambda f: f'{f.first_sync_cpu:.1f}')} |",
        "| first sync: API requests (the bench's own taken out) | "
        f"{per_round(lambda f: f'{f.first_sync_requests:.0f}')} |",
        f"| push → job applied, p50 / p99 (n) | {pooled(latency('applied'))} |",
        f"| push → repository at the commit, p50 / p99 (n) | {pooled(latency('synced'))} |",
        f"| push: controller CPU per push, ms (p50) | {pooled(median('push_cpu', 1000))} |",
        f"| push: API requests per push (p50) | {pooled(median('push_requests'))} |",
        f"| no-op push trigger → handled, p50 | {pooled(noop)} |",
        f"| no-op push trigger: controller CPU, ms (p50) | {pooled(median('noop_cpu', 1000))} |",
        f"| no-op push trigger: API requests (p50) | {pooled(median('noop_requests'))} |",
        "| forced full reconcile, nothing changed → handled, p50 / p99 | "
        f"{pooled(latency('full'))} |",
        f"| forced full reconcile: controller CPU, ms (p50) | {pooled(median('full_cpu', 1000))} |",
        f"| forced full reconcile: API requests (p50) | {pooled(median('full_requests'))} |",
        f"| RSS at the end, MiB (per round) | {per_round(lambda f: f'{f.rss:.0f}')} |",
        f"| peak RSS (VmHWM), MiB (per round) | {per_round(lambda f: f'{f.hwm:.0f}')} |",
        f"| load average (1 min) at start (per round) | {per_round(lambda f: f'{f.load:.1f}')} |",
    ]
    return lines


# --- main -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def reference_cluster(kubeconfig: Path | None) -> Any:
    """`kubeconfig` as given, else a reference control plane of our own for the run."""
    if kubeconfig is not None:
        yield kubeconfig
        return
    d = Path(tempfile.mkdtemp(prefix="bench-flux-ref-"))
    shutil.rmtree(d)
    subprocess.run([str(REPO / "hack" / "reference-cluster"), "build"], check=True)
    out = (Path(tempfile.gettempdir()) / "bench-flux-reference.log").open("wb")
    proc = subprocess.Popen(
        [str(REPO / "hack" / "reference-cluster"), "start", str(d)],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:

        async def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"hack/reference-cluster exited {proc.returncode} ({out.name})")
            return b"reference cluster ready:" in Path(out.name).read_bytes()

        await until(ready, 300, "the reference cluster")
        yield d / "kubeconfig"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(d, ignore_errors=True)


async def main_async(args: argparse.Namespace) -> None:
    POLL[0] = args.poll
    names = tuple(args.only.split(",")) if args.only else ("trainops", "flux")
    if "flux" in names:
        flux_peer("build")
    versions = flux_versions()
    tmp = Path(tempfile.mkdtemp(prefix="bench-flux-"))
    try:
        async with reference_cluster(args.kubeconfig) as kubeconfig:
            await _run(args, kubeconfig, tmp, versions, names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _run(
    args: argparse.Namespace, kubeconfig: Path, tmp: Path, versions: str, names: tuple[str, ...]
) -> None:
    for crd in [REPO / "deploy" / "crds", *(flux_crds() if "flux" in names else [])]:
        bg_kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    client: Any = Counting(await Client.connect(kubeconfig, timeout=60))
    server = (await client.request("GET", "/version"))["gitVersion"]
    root = tmp / "git"
    root.mkdir()
    bare, work = root / "jobs.git", tmp / "work"
    t0 = time.perf_counter()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "jobs").mkdir()
    for i in range(args.jobs):
        name = bg._job_name(i)
        (work / "jobs" / f"{name}.yaml").write_text(_manifest(name, 3))
    bg._git(work, "add", "-A")
    bg._git(work, "commit", "-q", "-m", f"{args.jobs} jobs")
    bg._git(work, "remote", "add", "origin", bare.as_uri())
    bg._git(work, "push", "-q", "origin", "main")
    print(f"repository built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows: dict[str, list[Figures]] = {n: [] for n in names}
    started = datetime.datetime.now(datetime.UTC)
    load0 = os.getloadavg()
    try:
        async with serve_git_http(root) as git_http:
            url = git_http.url_of("jobs.git")
            for round_ in range(args.rounds):
                order = names if round_ % 2 == 0 else tuple(reversed(names))
                for name in order:
                    sha = bg._git(work, "rev-parse", "HEAD")
                    kind = Flux if name == "flux" else Trainops
                    side = kind(client, kubeconfig, url, work)
                    print(f"round {round_ + 1}: {name}", file=sys.stderr, flush=True)
                    rows[name].append(await measure(side, args, sha, name[:4]))
    finally:
        await client.close()
    load1 = os.getloadavg()
    titles = {
        "trainops": "trainops up (GitOps, no job controller)",
        "flux": f"Flux ({versions.replace(' kustomize', ', kustomize')})",
    }
    print()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; API server {server} (reference)")
    print(
        f"at: {started:%Y-%m-%d %H:%M} UTC; load {load0[0]:.1f} {load0[1]:.1f} at start, "
        f"{load1[0]:.1f} {load1[1]:.1f} at end; {args.rounds} rounds, alternating"
    )
    print(
        f"repository: {args.jobs} TensorFlowTrainingJobs over smart HTTP (loopback); "
        f"{args.pushes} pushes and {args.noops} no-op triggers of each kind per round"
    )
    print()
    for line in table(rows, titles):
        print(line)


def bg_kubectl(kubeconfig: Path, *args: str) -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="a reference cluster already running (default: start one for the run)",
    )
    parser.add_argument("--jobs", type=int, default=1000, help="job manifests in the repository")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--pushes", type=int, default=5, help="one-file pushes per round")
    parser.add_argument("--noops", type=int, default=5, help="no-op triggers of each kind")
    parser.add_argument(
        "--poll", type=float, default=0.02, help="seconds between checks for a trigger's end"
    )
    parser.add_argument("--only", help="trainops or flux: measure just that one")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
