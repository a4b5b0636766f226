"""GitOps at scale on a real kube-apiserver (issue #17 item 6); results in docs/PERFORMANCE.md,
"GitOps at scale on the reference kube-apiserver".

    hack/reference-cluster start /tmp/ref-scale &          # a fresh one per scenario
    .venv/bin/python benchmarks/bench_gitops_scale.py --kubeconfig /tmp/ref-scale/kubeconfig \
        --scenario one|many [--workers 2] [--pushes 5] [--noops 20] [--apiserver-pid PID]

Scenario `one`: one JobRepository of 10,000 paused TensorFlowTrainingJobs (one file each, built
by `bench_gitops_large.make_repository`, plus as many unrelated files outside `path`), in
`default`. Scenario `many`: 50 JobRepositories of 200 each, each its own bare repository and
namespace (`default` for the first, the one whose no-op rounds and pushes are timed,
`scale-many-01`…`49` for the others). Jobs are paused: no controller is needed.

Measured, in this order, against `--kubeconfig` (a cluster used by nothing else):

1. the floor: 10,000 server-side applies of the same objects (the tracking labels and
   annotations the reconciler adds included) from a plain `kube.Client`, in a child process,
   `APPLY_PARALLELISM` in flight, into namespace `scale-floor` (the API server's APPLY
   latency in it from its `/metrics`, as below); then it deletes them (one
   DELETE of the collection) and waits until they are gone, before anything else starts;
2. the first sync: the GitOps reconciler (`GitOpsReconciler` on a `kube.Manager` with leader
   election on, the Manager's default timings) runs in this process; from the creation of the
   JobRepositories until every one is Synced at its commit. During it: this process's CPU,
   the event loop's largest stall (`Heartbeat`), the Lease — every loss seen by the elector
   (sampled every 100 ms) and `leaseTransitions` before and after —, and the kube-apiserver's
   request latency from its `/metrics` (`apiserver_request_duration_seconds`, the delta of the
   buckets before and after; WATCH and CONNECT left out; quantiles interpolated in the bucket
   as `histogram_quantile` does); and where the time went: each step of a round (fetch,
   checkout, load and pre-flight; compare; the sync operation; the status write) and every
   apply, timed by wrapping them (`instrument`);
3. the largest JobRepository `.status` as JSON;
4. no-op poll rounds and no-op push triggers, and push → applied for a one-file change
   (`bench_gitops_large.noop_rounds` and `push_rounds`, on the repository in `default`);
5. this process's RSS (the reconciler; git and the API server are other processes);
6. the floor again, the reconciler stopped (the load of a shared machine drifts; the first
   sync is also given against the mean of the two floors).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_gitops_large import (  # noqa: E402
    JOB,
    Heartbeat,
    Rounds,
    Shown,
    _established,
    _rss,
    make_repository,
    noop_rounds,
    push_rounds,
    until,
)
from benchmarks.cluster_probes import (  # noqa: E402
    LeaseWatch,
    Phases,
    latency_report,
    lease_spec,
    request_buckets,
)
from benchmarks.machine import cpu_model  # noqa: E402
from gitops.engine.compare import apply_body  # noqa: E402
from gitops.engine.pairing import ResourceKey  # noqa: E402
from gitops.engine.tenancy import Boundaries  # noqa: E402
from gitops.runtime import operations  # noqa: E402
from gitops.runtime.livestate import LiveReader  # noqa: E402
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings  # noqa: E402
from gitops.runtime.operations import APPLY_PARALLELISM  # noqa: E402
from gitops.runtime.reconciler import JOB_REPOSITORIES  # noqa: E402
from gitops.runtime.sync import SyncEngine  # noqa: E402
from kube import errors, resources  # noqa: E402
from kube.client import Client  # noqa: E402
from kube.manager import LeaderElection, Manager  # noqa: E402
from trainops.commands.crds import all_crds  # noqa: E402

FLOOR_NAMESPACE = "scale-floor"
SCENARIOS = {"one": (1, 10000), "many": (50, 200)}
"""Repositories and jobs in each."""


# -- the floor: a plain client's applies ---------------------------------------------------------


def floor_bodies(count: int) -> list[dict[str, Any]]:
    """The objects of the first sync, as the reconciler applies them, named alike."""
    bodies = []
    for i in range(count):
        desired = yaml.safe_load(JOB.format(i=i, v=1))
        name = desired["metadata"]["name"]
        key = ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", FLOOR_NAMESPACE, name)
        bodies.append(apply_body(desired, key, f"{FLOOR_NAMESPACE}/cms", "0" * 36))
    return bodies


async def floor(kubeconfig: str, count: int, apiserver_pid: int | None) -> dict[str, float]:
    """`count` server-side applies, APPLY_PARALLELISM at once: wall and CPU seconds; then
    the time to delete them again (here: the DELETE answers with every object deleted)."""
    client = await Client.connect(kubeconfig, timeout=60)
    try:
        await _ensure_namespace(client, FLOOR_NAMESPACE)
        bodies = floor_bodies(count)
        slots = asyncio.Semaphore(APPLY_PARALLELISM)

        async def apply(body: dict[str, Any]) -> None:
            async with slots:
                await client.patch(
                    resources.TFJOBS,
                    body["metadata"]["name"],
                    body,
                    FLOOR_NAMESPACE,
                    patch_type="apply",
                    field_manager="scale-floor",
                    force=True,
                )

        t0, c0, api0 = time.perf_counter(), time.process_time(), _cpu_seconds(apiserver_pid)
        await asyncio.gather(*(apply(b) for b in bodies))
        wall, cpu, api1 = (
            time.perf_counter() - t0,
            time.process_time() - c0,
            _cpu_seconds(apiserver_pid),
        )
        api = -1.0 if api0 is None or api1 is None else api1 - api0
        return {"wall": wall, "cpu": cpu, "apiserver": api, "cleared": await clear_floor(client)}
    finally:
        await client.close()


async def clear_floor(client: Client) -> float:
    """Delete the floor's jobs (one DELETE of the collection) and wait until none is left."""
    t0 = time.perf_counter()
    path = resources.TFJOBS.collection_path(FLOOR_NAMESPACE)
    await client.request("DELETE", path, timeout=900)

    async def empty() -> bool:
        got = await client.list(resources.TFJOBS, FLOOR_NAMESPACE, limit=1)
        return not got.get("items")

    await until(empty, 900)
    return time.perf_counter() - t0


async def measure_floor(
    args: argparse.Namespace, client: Client, total: int, out: dict[str, str], title: str
) -> float:
    """Run the floor in a child process; its figures into `out`; its wall seconds."""
    metrics0 = await request_buckets(client)
    pid = ["--apiserver-pid", str(args.apiserver_pid)] if args.apiserver_pid else []
    child = subprocess.run(
        [sys.executable, __file__, "--kubeconfig", args.kubeconfig, "--floor", str(total), *pid],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    if child.returncode != 0:
        raise SystemExit("the floor's child process failed: " + child.stderr[-2000:])
    got = json.loads(child.stdout.strip().splitlines()[-1])
    wall = float(got["wall"])
    out[f"{title}: server-side applies, plain client"] = (
        f"{total} in {wall:.1f} s ({total / wall:.0f}/s, {APPLY_PARALLELISM} in "
        f"flight); client CPU {got['cpu']:.1f} s"
    )
    if got["apiserver"] >= 0:
        out["  kube-apiserver CPU during it"] = f"{got['apiserver']:.1f} s"
    apply_latency = latency_report(metrics0, await request_buckets(client)).get("APPLY")
    out["  kube-apiserver latency APPLY in it"] = str(apply_latency)
    out["  floor objects deleted"] = f"{got['cleared']:.1f} s (not counted)"
    return wall


def instrument(running: GitOpsReconciler) -> Phases:
    """The steps of a round (`gitops.runtime.reconciler.Reconciler`) and every apply."""
    phases = Phases()
    reconciler = running.reconciler
    phases.wrap(reconciler, "_fetch", "fetch, checkout, load, pre-flight")
    phases.wrap(reconciler, "_compare", "compare")
    phases.wrap(operations, "run", "sync operation (the applies)")
    phases.wrap(reconciler, "_write_status", "status write")
    phases.wrap_class(LiveReader, "probe", "live state: probe")
    phases.wrap_class(LiveReader, "complete", "live state: complete")
    phases.wrap_class(SyncEngine, "apply", f"one apply ({APPLY_PARALLELISM} in flight)")
    return phases


# -- the scenario ---------------------------------------------------------------------------------


def _namespace(k: int) -> str:
    return "default" if k == 0 else f"scale-many-{k:02d}"


async def _ensure_namespace(client: Client, name: str) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(resources.NAMESPACES, {"metadata": {"name": name}})


async def install_crds(client: Client) -> None:
    for crd in all_crds():
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(resources.CRDS, crd)
    for crd in all_crds():
        name = str(crd["metadata"]["name"])

        async def established(name: str = name) -> bool:
            return await _established(client, name)

        await until(established, 120)


def _cpu_seconds(pid: int | None) -> float | None:
    if pid is None:
        return None
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_bytes(obj: dict[str, Any]) -> int:
    return len(json.dumps(obj.get("status") or {}, separators=(",", ":")))


async def scenario(args: argparse.Namespace) -> dict[str, str]:
    repos, jobs = SCENARIOS[args.scenario]
    jobs = args.jobs or jobs
    total = repos * jobs
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-scale-"))
    out = Shown(
        machine=f"{cpu_model()}, {os.cpu_count()} cores",
        scenario=f"{repos} repositor{'y' if repos == 1 else 'ies'} of {jobs} paused jobs",
        workers=f"{args.workers} repositories reconciled at once",
    )
    out["load average at start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    built = []
    for k in range(repos):
        (tmp / f"r{k:02d}").mkdir()
        built.append(make_repository(tmp / f"r{k:02d}", jobs, "jobs"))
    out["repositories built"] = f"{time.perf_counter() - t0:.1f} s (not counted)"
    client = await Client.connect(args.kubeconfig, timeout=60)
    await install_crds(client)
    for k in range(repos):
        await _ensure_namespace(client, _namespace(k))

    # 1. The floor, in a child process (its CPU and memory are not this process's).
    floor_wall = await measure_floor(args, client, total, out, "floor")
    out["load average after the floor"] = " ".join(f"{x:.2f}" for x in os.getloadavg())

    # 2. The reconciler, leader-elected with the Manager's timings.
    settings = GitOpsSettings(
        workers=args.workers,
        namespace=None,
        boundaries=Boundaries.unrestricted(),
        git_timeout=600,
    )
    manager = Manager(client, leader_election=LeaderElection())
    running = GitOpsReconciler(manager, tmp / "cache", settings)
    rounds = Rounds(running)
    phases = instrument(running)
    beat, lease = Heartbeat(), LeaseWatch(manager, settings.lease_name)
    out["reconciler RSS before start"] = _rss()
    manager.start()
    beat.start()
    lease.start()
    try:
        await running.wait_synced(timeout=120)

        async def leader() -> bool:
            return manager.is_leader(settings.lease_name)

        await until(leader, 60)
        spec0 = await lease_spec(client, settings.lease_name)
        metrics0 = await request_buckets(client)
        beat.reset()
        api0 = _cpu_seconds(args.apiserver_pid)
        t0, c0 = time.perf_counter(), time.process_time()
        for k, (bare, _sha) in enumerate(built):
            await client.create(JOB_REPOSITORIES, _repository(bare, _namespace(k)))
        shas = {_namespace(k): sha for k, (_bare, sha) in enumerate(built)}

        async def synced() -> list[dict[str, Any]] | None:
            items = (await client.list(JOB_REPOSITORIES))["items"]
            done = [
                o
                for o in items
                if (s := (o.get("status") or {}).get("sync") or {}).get("status") == "Synced"
                and s.get("revision") == shas.get(o["metadata"]["namespace"])
            ]
            return done if len(done) == repos else None

        objs = await _until_slow(synced, 3600)
        first = time.perf_counter() - t0
        cpu = time.process_time() - c0
        api_cpu = _cpu_seconds(args.apiserver_pid)
        metrics1 = await request_buckets(client)
        spec1 = await lease_spec(client, settings.lease_name)
        out["first sync (all Synced at their commit)"] = (
            f"{first:.1f} s = {first / floor_wall:.2f}x the floor ({total / first:.0f} jobs/s)"
        )
        out["  reconciler CPU during it"] = f"{cpu:.1f} s"
        if api0 is not None and api_cpu is not None:
            out["  kube-apiserver CPU during it"] = f"{api_cpu - api0:.1f} s"
        out["  loop max gap during it"] = f"{beat.max_gap * 1000:.0f} ms"
        out["  lease lost (sampled every 100 ms)"] = (
            f"{lease.losses} times (longest without it {lease.longest_gap:.1f} s); "
            f"leaseTransitions {spec0.get('leaseTransitions')} -> {spec1.get('leaseTransitions')}, "
            f"holder unchanged: {spec0.get('holderIdentity') == spec1.get('holderIdentity')}"
        )
        for name, figure in phases.report(t0, t0 + first).items():
            out[f"  {name}"] = figure
        for verb, figure in latency_report(metrics0, metrics1).items():
            out[f"  kube-apiserver latency {verb}"] = figure
        largest = max(objs, key=_status_bytes)
        out["largest JobRepository status (JSON)"] = (
            f"{_status_bytes(largest)} bytes = {_status_bytes(largest) / 1024:.1f} KiB "
            f"({largest['metadata']['namespace']}); summary {largest['status'].get('summary')}"
        )

        # 3. No-op rounds and pushes, on the repository in `default`.
        await noop_rounds(running, rounds, beat, args.noops, out)
        await push_rounds(running, rounds, client, tmp / "r00", jobs, "jobs", args.pushes, out)
        out["reconciler process RSS"] = _rss()
        items = (await client.list(JOB_REPOSITORIES))["items"]
        out["largest JobRepository status at the end"] = (
            f"{max(_status_bytes(o) for o in items)} bytes"
        )
        spec2 = await lease_spec(client, settings.lease_name)
        out["lease over the whole run"] = (
            f"lost {lease.losses} times; leaseTransitions {spec0.get('leaseTransitions')} -> "
            f"{spec2.get('leaseTransitions')}"
        )
        await lease.stop()
        await beat.stop()
        await manager.stop()  # its job informers would see the floor's 10,000 objects
        # 6. The floor again, the reconciler stopped: the machine's load drifts.
        again = await measure_floor(args, client, total, out, "floor again, after")
        out["first sync against the mean of the two floors"] = (
            f"{first:.1f} s = {2 * first / (floor_wall + again):.2f}x"
        )
        out["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return out
    finally:
        await lease.stop()
        await beat.stop()
        await manager.stop()
        await client.close()
        print(f"repositories kept in {tmp}; the cluster keeps the jobs", file=sys.stderr)


def _repository(bare: Path, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": "cms", "namespace": namespace},
        "spec": {
            "repoURL": bare.as_uri(),
            "path": "cms",
            "interval": "1h",
            "syncPolicy": {"automated": {}},
        },
    }


async def _until_slow(check: Any, timeout: float) -> Any:
    """`until` at 0.5 s: a list of every JobRepository is not free at 50 repositories."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise SystemExit(f"not done within {timeout} s")
        await asyncio.sleep(0.5)


def _parse(argv: Iterable[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="one")
    p.add_argument("--jobs", type=int, help="jobs per repository (a smoke run: fewer)")
    p.add_argument(
        "--workers", type=int, default=GitOpsSettings().workers, help="repositories at once"
    )
    p.add_argument("--pushes", type=int, default=5)
    p.add_argument("--noops", type=int, default=20)
    p.add_argument("--apiserver-pid", type=int, help="read the kube-apiserver's CPU from /proc")
    p.add_argument("--floor", type=int, help=argparse.SUPPRESS)  # the child process
    return p.parse_args(list(argv))


def main(argv: Iterable[str] = sys.argv[1:]) -> None:
    args = _parse(argv)
    if not Path(args.kubeconfig).is_file():
        raise SystemExit(f"bench_gitops_scale: --kubeconfig {args.kubeconfig}: no such file")
    if args.floor:
        print(json.dumps(asyncio.run(floor(args.kubeconfig, args.floor, args.apiserver_pid))))
        return
    asyncio.run(scenario(args))


if __name__ == "__main__":
    main()
