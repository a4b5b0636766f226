"""Benchmark of the job controller's own cost (run by hand; results go to docs/PERFORMANCE.md).

    .venv/bin/python benchmarks/bench_controller.py [--jobs 500] [--workers 4] [--rate JOBS_PER_S]
    .venv/bin/python benchmarks/bench_controller.py --kubeconfig FILE [--jobs 500] [--rate N]
    .venv/bin/python benchmarks/bench_controller.py --up [--jobs 20]

Three processes, so each one's CPU is its own: `trainops apiserver` (the embedded API server,
fresh data dir), `trainops controller` (what is measured) and this script, which submits the
jobs and plays the kubelet through the API (`tests/support/fakekubelet.py`): every pod it sees
is set Running, then Succeeded with exit code 0 — masters last, after the job's other replicas
run — so process start-up is not what is measured. By default every job is submitted at once (the
queue backs up; what is measured is throughput); `--rate` paces submissions, so the delay
measured is the controller's reaction time rather than time spent queued behind a saturated
API server.

`--kubeconfig FILE` runs the same against an API server already running (the reference
kube-apiserver of `hack/reference-cluster`), in a fresh namespace; its CPU and etcd's are read
from /proc when they run on this machine (found by the port in FILE), and the API server's own
request counts (`apiserver_request_total` on its /metrics) are reported by verb and resource.

Reports: time from the first create until every job is Succeeded (and jobs/s), the controller's
CPU seconds per job (from /proc), and the delay from the master pod's exit being written to the
job's status saying Succeeded (p50/p99/max), measured in this process's clock on both ends.

`--up` measures the whole product instead: `trainops up` (API server, process kubelet, webhook,
controller in one process), N jobs of a chief and two workers whose commands exit at once, each
pod a real local process; reported: time until every job is Succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_model  # noqa: E402
from kube import errors, resources  # noqa: E402
from kube.client import Client  # noqa: E402
from kube.informer import Informer  # noqa: E402
from tests.support.fakekubelet import set_pod_status  # noqa: E402
from tests.support.jobs import replica, tf_job  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
_SERVICE_ACCOUNTS = resources.Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
METRICS_PORT = 18089


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _wait_file(path: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start within 60 s")
        await asyncio.sleep(0.1)


def _job(i: int, namespace: str = "default") -> dict[str, Any]:
    job = tf_job(replica("chief"), replica("worker", 2), replica("ps"), name=f"job-{i:04d}")
    job["metadata"]["namespace"] = namespace
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "None"}
    return job


@dataclass(frozen=True)
class Flavor:
    """What the simulated kubelet and the clock need to know of a controller's jobs and pods."""

    resource: resources.Resource
    make_job: Callable[[int, str], dict[str, Any]]
    label_prefix: str
    """Pods carry `<prefix>/job-name` and, on the replica whose exit ends the job,
    `<prefix>/job-role: master`."""
    succeeded: Callable[[dict[str, Any]], bool]


TRAINOPS = Flavor(
    resources.TFJOBS,
    _job,
    "batch.tensorstack.dev",
    lambda job: (job.get("status") or {}).get("phase") == "Succeeded",
)


async def bench(
    jobs: int, workers: int, rate: float | None = None, kubeconfig: Path | None = None
) -> dict[str, str]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    api: subprocess.Popen[bytes] | None = None
    namespace = "default"
    if kubeconfig is None:
        api = subprocess.Popen(
            [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(data_dir)],
            cwd=REPO,
            stderr=subprocess.DEVNULL,
        )
        api_pids = {"API server": api.pid}
        kubeconfig = data_dir / "kubeconfig"
        await _wait_file(data_dir / "server.json", api, "apiserver")
    else:
        api_pids = _reference_pids(kubeconfig)
        namespace = f"bench-{os.getpid()}"
    ctl: subprocess.Popen[bytes] | None = None
    try:
        crds = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "apply",
                "--server-side",
                "-f",
                str(REPO / "deploy" / "crds"),
            ],
            capture_output=True,
            text=True,
        )
        if crds.returncode != 0:
            raise SystemExit(crds.stderr)
        ctl = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainops",
                "controller",
                "--kubeconfig",
                str(kubeconfig),
                "--no-leader-elect",
                "--port",
                str(METRICS_PORT),
                "--bind",
                "127.0.0.1",
                "--workers",
                str(workers),
                "--log-level",
                "WARNING",
            ],
            cwd=REPO,
        )
        client = await Client.connect(kubeconfig, timeout=60)
        if namespace != "default":
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            await client.create(resources.NAMESPACES, ns)
            await _wait_service_account(client, namespace)
        api_cpu0 = {k: _cpu_seconds(pid) for k, pid in api_pids.items()}
        requests0 = await _apiserver_requests(client) if api is None else {}
        own_cpu0 = time.process_time()
        results = await _run(client, ctl, jobs, rate, namespace)
        for what, pid in api_pids.items():
            results[f"{what} CPU"] = f"{_cpu_seconds(pid) - api_cpu0[what]:.1f} s"
        results.update(_controller_metrics())
        results["this process's CPU (kubelet)"] = f"{time.process_time() - own_cpu0:.1f} s"
        if api is None:
            results.update(_request_deltas(requests0, await _apiserver_requests(client)))
        if namespace != "default":
            # Left behind, its jobs and pods would sit in every later run's informers (a
            # shared API server: bench_peer's RSS and burst figures moved with them).
            await client.delete(resources.NAMESPACES, namespace)
        await client.close()
        return results
    finally:
        for proc in (ctl, api):
            if proc is not None:
                proc.terminate()
                proc.wait(30)


def _reference_pids(kubeconfig: Path) -> dict[str, int]:
    """The kube-apiserver serving `kubeconfig`'s port and its etcd, when on this machine."""
    import yaml

    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    port = server.rsplit(":", 1)[1].rstrip("/")
    cmdlines = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
    found: dict[str, int] = {}
    etcd_urls: list[bytes] = []
    for pid, argv in cmdlines.items():
        if (
            argv
            and argv[0].endswith(b"kube-apiserver")
            and f"--secure-port={port}".encode() in argv
        ):
            found["API server"] = pid
            etcd_urls = [a.split(b"=", 1)[1] for a in argv if a.startswith(b"--etcd-servers=")]
    for pid, argv in cmdlines.items():
        if (
            argv
            and argv[0].endswith(b"etcd")
            and any(b"--listen-client-urls=" + url in argv for url in etcd_urls)
        ):
            found["etcd"] = pid
    return found


async def _wait_service_account(client: Client, namespace: str) -> None:
    """A real API server refuses pods until the namespace's `default` ServiceAccount exists."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await client.get(_SERVICE_ACCOUNTS, "default", namespace)
            return
        except errors.NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _apiserver_requests(client: Client) -> dict[tuple[str, str], float]:
    """kube-apiserver's `apiserver_request_total`, summed by (verb, resource[/subresource])."""
    return (await _apiserver_metrics(client, ("apiserver_request_total",)))[
        "apiserver_request_total"
    ]


async def _apiserver_metrics(
    client: Client, families: tuple[str, ...]
) -> dict[str, dict[tuple[str, str], float]]:
    """kube-apiserver's counters `families` (e.g. `apiserver_request_duration_seconds_sum`),
    each summed by (verb, resource[/subresource]), from one scrape."""
    text = (await client.request("GET", "/metrics", raw=True)).decode()
    totals: dict[str, dict[tuple[str, str], float]] = {family: {} for family in families}
    for line in text.splitlines():
        family, brace, rest = line.partition("{")
        if not brace or family not in totals:
            continue
        labels_text, _, value = rest.rpartition(" ")
        labels = dict(part.split("=", 1) for part in labels_text.rstrip("}").split(",") if part)
        clean = {k: v.strip('"') for k, v in labels.items()}
        resource = clean.get("resource", "") + (
            "/" + clean["subresource"] if clean.get("subresource") else ""
        )
        key = (clean.get("verb", ""), resource)
        totals[family][key] = totals[family].get(key, 0.0) + float(value)
    return totals


def _request_deltas(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, str]:
    deltas = {k: v - before.get(k, 0.0) for k, v in after.items()}
    top = sorted(((v, k) for k, v in deltas.items() if v >= 1), reverse=True)
    total = sum(v for v, _ in top)
    lines = {"API requests (all)": f"{total:.0f}"}
    for value, (verb, resource) in top[:12]:
        lines[f"  {verb} {resource}"] = f"{value:.0f}"
    return lines


async def _run(
    client: Client,
    ctl: subprocess.Popen[bytes],
    jobs: int,
    rate: float | None,
    namespace: str,
    flavor: Flavor = TRAINOPS,
    run_seconds: float = 0.0,
    stamps: dict[str, tuple[float, float]] | None = None,
) -> dict[str, str]:
    """One measurement; a job's chief exits `run_seconds` after its four replicas run (0: at
    once, so the job is over before any batched status write of its progress). `stamps`, if
    given, gets each job's (chief exit written, Succeeded seen) in wall-clock seconds."""
    exited: dict[str, float] = {}  # job -> when its master's exit was written
    done: dict[str, float] = {}
    replicas_running: dict[str, int] = {}
    wall_exited: dict[str, float] = {}
    wall_done: dict[str, float] = {}
    kubelet_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    pods = Informer(client, resources.PODS, namespace)
    tfjobs = Informer(client, flavor.resource, namespace)

    def on_pod(event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "ADDED" and (pod.get("status") or {}).get("phase") != "Running":
            kubelet_queue.put_nowait(pod)

    def on_job(event: str, job: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = job["metadata"]["name"]
        if flavor.succeeded(job) and name not in done:
            done[name] = time.perf_counter()
            wall_done[name] = time.time()

    pods.add_handler(on_pod)
    tfjobs.add_handler(on_job)
    tasks = [asyncio.create_task(pods.run()), asyncio.create_task(tfjobs.run())]
    await pods.wait_synced()
    await tfjobs.wait_synced()

    masters: dict[str, str] = {}

    async def kubelet() -> None:
        while True:
            pod = await kubelet_queue.get()
            labels = pod["metadata"].get("labels") or {}
            job = labels.get(f"{flavor.label_prefix}/job-name", "")
            name = pod["metadata"]["name"]
            try:
                if pod.get("_finish"):  # the job's replicas all run: its master exits 0
                    await set_pod_status(client, namespace, name, "Succeeded", 0)
                    exited[job] = time.perf_counter()
                    wall_exited[job] = time.time()
                    continue
                await set_pod_status(client, namespace, name, "Running")
                if labels.get(f"{flavor.label_prefix}/job-role") == "master":
                    masters[job] = name
                replicas_running[job] = replicas_running.get(job, 0) + 1
                if replicas_running[job] == 4:
                    finish = {"_finish": True, "metadata": {"name": masters[job], "labels": labels}}
                    if run_seconds > 0:
                        loop = asyncio.get_running_loop()
                        loop.call_later(run_seconds, kubelet_queue.put_nowait, finish)
                    else:
                        kubelet_queue.put_nowait(finish)
            except errors.APIError as exc:
                print(f"kubelet: {name}: {exc}", file=sys.stderr)

    players = [asyncio.create_task(kubelet()) for _ in range(16)]
    cpu0 = _cpu_seconds(ctl.pid)
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(16)

    async def submit(i: int) -> None:
        if rate:
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
        async with sem:
            await client.create(flavor.resource, flavor.make_job(i, namespace))

    await asyncio.gather(*(submit(i) for i in range(jobs)))
    submitted = time.perf_counter() - t0
    deadline = time.monotonic() + 600
    while len(done) < jobs and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - t0
    cpu = _cpu_seconds(ctl.pid) - cpu0
    for task in [*players, *tasks]:
        task.cancel()
    delays = [done[j] - exited[j] for j in done if j in exited]
    if stamps is not None:
        stamps.update({j: (wall_exited[j], wall_done[j]) for j in done if j in wall_exited})
    return {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "jobs": f"{jobs} TensorFlowTrainingJobs × 4 replicas (chief, 2 workers, ps)"
        + (f", submitted at {rate:g}/s" if rate else ", submitted at once"),
        "submitted": f"{submitted:.1f} s",
        "all Succeeded": f"{len(done)}/{jobs} in {elapsed:.1f} s ({len(done) / elapsed:.1f} jobs/s)",
        "controller CPU": f"{cpu:.1f} s ({cpu / max(1, len(done)) * 1000:.1f} ms per job)",
        "master exit → job Succeeded": (
            f"p50 {statistics.median(delays) * 1000:.0f} ms, p99 {_pct(delays, 0.99) * 1000:.0f} ms, "
            f"max {max(delays) * 1000:.0f} ms ({len(delays)} jobs)"
            if delays
            else "no samples"
        ),
    }


def _controller_metrics() -> dict[str, str]:
    """Mean queue wait and work time per key, and reconciles, from the controller's /metrics."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read()
    values: dict[str, float] = {}
    for line in text.decode().splitlines():
        if line.startswith("trainops_controller_") and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = values.get(name, 0.0) + float(value)
    out = {}
    for label, metric in (
        ("queue wait (mean)", "trainops_controller_workqueue_queue_duration_seconds"),
        ("work per key (mean)", "trainops_controller_workqueue_work_duration_seconds"),
    ):
        count = values.get(metric + "_count", 0.0)
        total = values.get(metric + "_sum", 0.0)
        out[label] = f"{total / count * 1000:.1f} ms over {count:.0f}" if count else "none"
    reconciles = sum(
        v for k, v in values.items() if k.startswith("trainops_controller_reconciles_total")
    )
    out["reconciles"] = f"{reconciles:.0f}"
    return out


async def bench_up(jobs: int) -> dict[str, str]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-up-"))
    up = subprocess.Popen(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(data_dir)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_file(data_dir / "kubeconfig", up, "trainops up")
        client = await Client.connect(data_dir / "kubeconfig", timeout=60)
        await _wait_crds(client)
        names = [f"e2e-{i:03d}" for i in range(jobs)]
        t0 = time.perf_counter()
        for name in names:
            job = tf_job(replica("chief"), replica("worker", 2), name=name)
            job["metadata"]["namespace"] = "default"
            for spec in job["spec"]["replicaSpecs"]:
                spec["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "exit 0"]
            await client.create(resources.TFJOBS, job)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            body = await client.list(resources.TFJOBS, "default")
            done = [j for j in body["items"] if (j.get("status") or {}).get("phase") == "Succeeded"]
            if len(done) == jobs:
                break
            await asyncio.sleep(0.1)
        elapsed = time.perf_counter() - t0
        await client.close()
        return {
            "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "jobs": f"{jobs} TensorFlowTrainingJobs × 3 replicas, real processes (trainops up)",
            "all Succeeded": f"{len(done)}/{jobs} in {elapsed:.1f} s ({len(done) / elapsed:.1f} jobs/s)",
            "trainops up CPU": f"{_cpu_seconds(up.pid):.1f} s in all (start-up included)",
        }
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)


async def _wait_crds(client: Client) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            await client.list(resources.TFJOBS, "default", limit=1)
            return
        except errors.APIError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--rate", type=float, help="submit this many jobs a second (default: all at once)"
    )
    parser.add_argument("--up", action="store_true", help="the whole product, real processes")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="use the API server in FILE (e.g. the reference kube-apiserver) instead of starting "
        "`trainops apiserver`",
    )
    args = parser.parse_args()
    run = (
        bench_up(args.jobs)
        if args.up
        else bench(args.jobs, args.workers, args.rate, args.kubeconfig)
    )
    for key, value in asyncio.run(run).items():
        print(f"{key:30} {value}")


if __name__ == "__main__":
    main()
