"""trainops' job controller side by side with Kubeflow's training-operator (run by hand; results
go to docs/PERFORMANCE.md).

    .venv/bin/python benchmarks/bench_peer.py --kubeconfig FILE [--jobs 200] [--rates 5,10]
                                              [--rounds 3] [--paced-jobs 300]
                                              [--run-seconds 0,2] [--baseline DIR]
                                              [--trace DIR]

`--baseline DIR` adds a third contender, `trainops-before`: the controller of another source
tree (`git archive <commit> | tar -x -C DIR`), alternating with the other two, so a change is
measured before and after under the same load. `--trace DIR` runs this tree's controller under
benchmarks/traced_controller.py; `benchmarks/trace_tail.py DIR` then cuts every job's exit →
Succeeded at the controller's stamps (not for figures: the tracing costs CPU and memory).

The peer is `github.com/kubeflow/training-operator/cmd/training-operator.v1@v1.9.3`, built with
`go install` from the Go module proxy into ~/.cache/trainops/peer/ (once; its TFJob CRD comes
from the module cache's `manifests/base/crds/`). Both run against the same API server (the
reference kube-apiserver of `hack/reference-cluster`), each in turn, fresh for every
measurement and in a fresh namespace that is deleted afterwards; the same simulated kubelet
(benchmarks/bench_controller.py) sets every pod Running and, once a job's four replicas run,
its chief Succeeded. Same job shape for both: a chief, two workers and a parameter server.

Like with like: both reconcile with WORKERS (4) concurrent workers (the peer's
`--controller-threads`, trainops' `--workers`), both log at error level only (the peer's zap
logger in production mode, `--zap-devel=false --zap-log-level=error`; trainops
`--log-level ERROR`), neither elects a leader, and the peer's client limit is raised
(`--kube-api-qps 1000 --kube-api-burst 2000`, as most tuned installs; trainops has none by
default). The peer runs its TFJob scheme only. Each controller is measured only once it is
ready: a canary job in a namespace of its own has been given a status by it (no fixed wait).
A run in which not every job Succeeded within its deadline stops the benchmark: it is a
failure, not a figure.

Jobs that exit at once and jobs that run (`--run-seconds 0,2`: a chief exits that long after
its job's four replicas run; with 0 a job can be over inside trainops' status batching window,
with 2 it cannot) are measured in every round. Within each round the two controllers alternate
figure by figure (burst, then each rate), the
order flipping every time. For each controller and round: jobs/s with every job submitted at
once; p50/p99/max from the chief's exit to the job's Succeeded at each paced rate (300 jobs by
default: with 100, p99 is the slowest job alone, and one stall of the shared machine decides
it); controller CPU per job (from /proc, paced run at the first rate); peak RSS (VmHWM); API
requests per job by verb and resource (kube-apiserver's `apiserver_request_total`, the
simulated kubelet's and the submissions' included: they are the same for both). Beside the
table: the load average when each run started, kube-apiserver's and etcd's CPU per job in it
(both share the machine: a slow run shows where it waited), and
kube-apiserver's own mean time for the controller's status PUT (what a status write of its CRD
costs the server: CEL rules, schema, size).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import bench_controller as bc  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from certs import pki  # noqa: E402
from kube import errors, resources  # noqa: E402
from kube.client import Client  # noqa: E402

PEER_MODULE = "github.com/kubeflow/training-operator"
PEER_COMMAND = f"{PEER_MODULE}/cmd/training-operator.v1"
PEER_VERSION = "v1.9.3"
PEER_BIN = Path.home() / ".cache" / "trainops" / "peer" / PEER_VERSION
PEER_NAMESPACE = "kubeflow"
PEER_SECRET = "training-operator-webhook-cert"
PEER_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
PEER_METRICS = 18090
WORKERS = 4
"""Concurrent reconciles, for both controllers alike."""
LOG_LEVEL = "error"
"""The level both log at (zap has no warning level on its command line)."""
LOGS = Path(tempfile.gettempdir()) / "bench-peer-logs"
_FAMILIES = (
    "apiserver_request_total",
    "apiserver_request_duration_seconds_sum",
    "apiserver_request_duration_seconds_count",
)
TFJOBS_V1 = resources.Resource("kubeflow.org", "v1", "tfjobs", "TFJob", True)


# --- the peer -------------------------------------------------------------------------------


def install_peer() -> Path:
    """The peer's binary, built once with `go install` (Go module proxy)."""
    binary = PEER_BIN / "training-operator.v1"
    if not binary.exists():
        PEER_BIN.mkdir(parents=True, exist_ok=True)
        print(f"building {PEER_COMMAND}@{PEER_VERSION} (once)...", file=sys.stderr)
        subprocess.run(
            ["go", "install", f"{PEER_COMMAND}@{PEER_VERSION}"],
            env={**os.environ, "GOBIN": str(PEER_BIN)},
            check=True,
            cwd=tempfile.gettempdir(),
        )
    return binary


def peer_crd() -> Path:
    cache = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return (
        Path(cache)
        / f"{PEER_MODULE}@{PEER_VERSION}"
        / "manifests"
        / "base"
        / "crds"
        / "kubeflow.org_tfjobs.yaml"
    )


def _peer_job(i: int, namespace: str) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "tensorflow/tensorflow:2.21.0",
                            "command": ["python3", "-c", "print('done')"],
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ]
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": f"job-{i:04d}", "namespace": namespace},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "tfReplicaSpecs": {"Chief": replica(1), "Worker": replica(2), "PS": replica(1)},
        },
    }


def _peer_succeeded(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions)


PEER = bc.Flavor(TFJOBS_V1, _peer_job, "training.kubeflow.org", _peer_succeeded)


async def _prepare_peer(client: Client, kubeconfig: Path, work: Path) -> None:
    """Its CRD, its namespace, and the webhook certificate it insists on (Secret + files)."""
    _kubectl(kubeconfig, "apply", "--server-side", "-f", str(peer_crd()))
    await _ensure_namespace(client, PEER_NAMESPACE)
    ca = pki.new_ca("bench-peer-ca")
    service = f"training-operator.{PEER_NAMESPACE}.svc"
    cert = pki.new_serving_cert(ca, [service, "localhost", "127.0.0.1"])
    files = {"tls.crt": cert.cert_pem, "tls.key": cert.key_pem, "ca.crt": ca.cert_pem}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": PEER_SECRET, "namespace": PEER_NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(resources.SECRETS, secret)
    PEER_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (PEER_CERT_DIR / name).write_bytes(data)
    (work / "peer-ready").touch()


def _start_peer(kubeconfig: Path) -> subprocess.Popen[bytes]:
    log = open(LOGS / "training-operator.log", "ab")  # noqa: SIM115 (the child keeps it)
    return subprocess.Popen(
        [
            str(install_peer()),
            f"--kubeconfig={kubeconfig}",
            "--enable-scheme=tfjob",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{PEER_METRICS}",
            "--health-probe-bind-address=127.0.0.1:0",
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
            f"--controller-threads={WORKERS}",
            "--zap-devel=false",
            f"--zap-log-level={LOG_LEVEL}",
        ],
        env={k: v for k, v in os.environ.items() if k != "KUBEFLOW_NAMESPACE"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _start_trainops(
    kubeconfig: Path, tree: Path = REPO, trace: Path | None = None
) -> subprocess.Popen[bytes]:
    """`trainops controller` of the source tree `tree` (this one, or `--baseline`'s); with
    `trace`, this tree's benchmarks/traced_controller.py runs it and writes its timeline there."""
    log = open(LOGS / f"trainops-{tree.name}.log", "ab")  # noqa: SIM115 (the child keeps it)
    traced = [str(REPO / "benchmarks" / "traced_controller.py"), str(trace)] if trace else []
    return subprocess.Popen(
        [
            sys.executable,
            *(traced or ["-m", "trainops"]),
            *("controller", "--kubeconfig", str(kubeconfig)),
            *("--no-leader-elect", "--port", str(bc.METRICS_PORT), "--bind", "127.0.0.1"),
            *("--workers", str(WORKERS), "--log-level", LOG_LEVEL.upper()),
        ],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)} if traced else None,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


# --- one measurement ------------------------------------------------------------------------


async def measure(
    name: str,
    kubeconfig: Path,
    jobs: int,
    rate: float | None,
    run_seconds: float = 0.0,
    *,
    baseline: Path | None = None,
    trace: Path | None = None,
) -> dict[str, float | str]:
    """One controller, fresh, in a fresh namespace: the figures of one run. `name` is
    "training-operator", "trainops" (this tree) or "trainops-before" (the tree `baseline`);
    with `trace` (a directory) this tree's controller writes its timeline there, and the
    jobs' exit and Succeeded stamps go beside it (benchmarks/trace_tail.py reads both)."""
    flavor = PEER if name == "training-operator" else bc.TRAINOPS
    client = await Client.connect(kubeconfig, timeout=60)
    namespace = f"peer-{name[:8]}-{int(time.time() * 1000) % 10**9}"
    await _ensure_namespace(client, namespace)
    await bc._wait_service_account(client, namespace)
    timeline = trace / f"{namespace}.controller.jsonl" if trace and name == "trainops" else None
    if name == "training-operator":
        proc = _start_peer(kubeconfig)
    elif name == "trainops-before":
        assert baseline is not None
        proc = _start_trainops(kubeconfig, baseline)
    else:
        proc = _start_trainops(kubeconfig, trace=timeline)
    try:
        await _wait_ready(client, proc, name, flavor)
        metrics0 = await bc._apiserver_metrics(client, _FAMILIES)
        server_pids = bc._reference_pids(kubeconfig)
        server_cpu0 = {k: bc._cpu_seconds(pid) for k, pid in server_pids.items()}
        load0 = os.getloadavg()[0]
        stamps: dict[str, tuple[float, float]] = {}
        out = await bc._run(client, proc, jobs, rate, namespace, flavor, run_seconds, stamps)
        if trace is not None:
            (trace / f"{namespace}.jobs.json").write_text(json.dumps(stamps))
        finished = out["all Succeeded"].split()[0]
        if finished != f"{jobs}/{jobs}":
            raise SystemExit(
                f"{name}: only {finished} jobs Succeeded ({out['all Succeeded']}; rate {rate}, "
                f"run {run_seconds:g} s): a run that did not finish is a failure, not a figure"
            )
        server_ms = {
            k: (bc._cpu_seconds(pid) - server_cpu0[k]) / jobs * 1000
            for k, pid in server_pids.items()
        }
        metrics1 = await bc._apiserver_metrics(client, _FAMILIES)
        delta = {
            family: {k: v - metrics0[family].get(k, 0.0) for k, v in metrics1[family].items()}
            for family in _FAMILIES
        }
        deltas = delta["apiserver_request_total"]
        status_put = ("PUT", f"{flavor.resource.plural}/status")
        writes = delta["apiserver_request_duration_seconds_count"].get(status_put, 0.0)
        write_seconds = delta["apiserver_request_duration_seconds_sum"].get(status_put, 0.0)
        figures: dict[str, float | str] = {
            "jobs/s": float(out["all Succeeded"].split("(")[1].split()[0]),
            "latency": out["master exit → job Succeeded"],
            "cpu_ms_per_job": float(out["controller CPU"].split("(")[1].split()[0]),
            "rss_mib": _peak_rss_mib(proc.pid),
            "requests_per_job": sum(deltas.values()) / jobs,
            "requests": _by_verb(deltas, jobs),
            "context": f"load {load0:.1f}; "
            + ", ".join(f"{k} {v:.0f} ms/job" for k, v in server_ms.items())
            + f"; its status PUT {write_seconds / max(1.0, writes) * 1000:.1f} ms (server's mean)",
        }
        return figures
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        await _delete_namespace(client, namespace)
        await client.close()


async def _wait_ready(
    client: Client, proc: subprocess.Popen[bytes], name: str, flavor: bc.Flavor
) -> None:
    """Wait until the controller has listed, watched and reconciled: a canary job in a
    namespace of its own gets a status from it. Then the canary's namespace goes."""
    namespace = f"ready-{name[:8]}-{int(time.time() * 1000) % 10**9}"
    await _ensure_namespace(client, namespace)
    try:
        await client.create(flavor.resource, flavor.make_job(0, namespace))
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited with {proc.returncode} (logs in {LOGS})")
            job = await client.get(flavor.resource, "job-0000", namespace)
            if job.get("status"):
                return
            if time.monotonic() >= deadline:
                raise SystemExit(f"{name} gave its canary job no status within 120 s")
            await asyncio.sleep(0.1)
    finally:
        await _delete_namespace(client, namespace)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _by_verb(deltas: dict[tuple[str, str], float], jobs: int) -> str:
    top = sorted(((v, k) for k, v in deltas.items() if v / jobs >= 0.1), reverse=True)
    return ", ".join(f"{verb} {resource} {v / jobs:.1f}" for v, (verb, resource) in top[:8])


async def _ensure_namespace(client: Client, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(resources.NAMESPACES, body)


async def _delete_namespace(client: Client, name: str) -> None:
    try:
        await client.delete(resources.NAMESPACES, name)
    except errors.NotFound:
        return
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            await client.get(resources.NAMESPACES, name)
        except errors.NotFound:
            return
        await asyncio.sleep(0.5)


def _kubectl(kubeconfig: Path, *args: str) -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)


# --- the table ------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> None:
    kubeconfig: Path = args.kubeconfig
    names = tuple(args.only.split(",")) if args.only else ("trainops", "training-operator")
    if args.baseline is not None and "trainops-before" not in names:
        names = ("trainops-before", *names)
    if "training-operator" in names:
        install_peer()
    LOGS.mkdir(exist_ok=True)
    print(f"controller logs in {LOGS}", file=sys.stderr)
    _kubectl(kubeconfig, "apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    client = await Client.connect(kubeconfig, timeout=60)
    work = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    if "training-operator" in names:
        await _prepare_peer(client, kubeconfig, work)
    await client.close()
    rates = [float(r) for r in args.rates.split(",") if r]
    if args.trace is not None:
        args.trace.mkdir(parents=True, exist_ok=True)
    # rows[name][round] = {"burst": figures, "5": figures, "10": figures}
    rows: dict[str, list[dict[str, dict[str, Any]]]] = {name: [] for name in names}
    # Alternating within each figure: the two bursts (and the two runs at a rate) follow each
    # other, so a change in the machine's load between them is as short as it can be.
    run_seconds = [float(s) for s in str(args.run_seconds).split(",") if s]
    runs = [
        f"{kind}@{seconds:g}"
        for seconds in run_seconds
        for kind in ("burst", *(f"{rate:g}" for rate in rates))
    ]
    for round_ in range(args.rounds):
        row_of: dict[str, dict[str, Any]] = {name: {} for name in names}
        for i, run in enumerate(runs):
            order = names if (round_ + i) % 2 == 0 else tuple(reversed(names))
            kind, seconds = run.split("@")
            for name in order:
                rate = None if kind == "burst" else float(kind)
                count = args.jobs if kind == "burst" else args.paced_jobs
                figures = await measure(
                    name,
                    kubeconfig,
                    count,
                    rate,
                    float(seconds),
                    baseline=args.baseline,
                    trace=args.trace,
                )
                row_of[name][run] = figures
                shown = {k: v for k, v in figures.items() if k not in ("context", "requests")}
                print(
                    f"round {round_ + 1} {name} {run}: {figures['context']}; {shown}",
                    file=sys.stderr,
                    flush=True,
                )
        for name in names:
            rows[name].append(row_of[name])

    def cells(run: str, figure: str, fmt: str = "{}") -> str:
        per_name = [" / ".join(fmt.format(r[run][figure]) for r in rows[n]) for n in names]
        return " | ".join(per_name)

    load = os.getloadavg()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; load {load[0]:.1f} {load[1]:.1f}")
    print(f"at: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; rounds alternate")
    print(f"burst: {args.jobs} jobs at once; paced: {args.paced_jobs} jobs at {args.rates} jobs/s")
    print(f"both: {WORKERS} workers, logging at {LOG_LEVEL}; {args.rounds} alternating rounds")
    titles = {
        "trainops": "trainops",
        "trainops-before": f"trainops before ({args.baseline})",
        "training-operator": f"training-operator v1.9.3 ({WORKERS} threads)",
    }
    for chief_seconds in run_seconds:
        at = f"@{chief_seconds:g}"
        print()
        print(f"a chief exits {chief_seconds:g} s after its job's four replicas run:")
        print()
        print("| figure (one value per round) | " + " | ".join(titles[n] for n in names) + " |")
        print("|---" * (len(names) + 1) + "|")
        print(f"| {args.jobs} jobs at once, jobs/s | {cells('burst' + at, 'jobs/s', '{:.1f}')} |")
        for rate in rates:
            latency = cells(f"{rate:g}{at}", "latency")
            print(f"| chief exit → Succeeded at {rate:g} jobs/s | {latency} |")
        first = (f"{rates[0]:g}" if rates else "burst") + at
        cpu = cells(first, "cpu_ms_per_job", "{:.1f}")
        print(f"| controller CPU per job at {first.split('@')[0]}/s, ms | {cpu} |")
        print(f"| peak RSS (burst run), MiB | {cells('burst' + at, 'rss_mib', '{:.0f}')} |")
        requests = cells(first, "requests_per_job", "{:.1f}")
        print(f"| API requests per job at {first.split('@')[0]}/s | {requests} |")
    print()
    first = (f"{rates[0]:g}" if rates else "burst") + f"@{run_seconds[0]:g}"
    for name in names:
        for i, row in enumerate(rows[name]):
            print(f"requests per job, {name}, round {i + 1}: {row[first]['requests']}")
    print()
    for name in names:
        for i, row in enumerate(rows[name]):
            where = "; ".join(f"{run}: {row[run]['context']}" for run in runs)
            print(f"while measuring {name}, round {i + 1}: {where}")
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, metavar="FILE")
    parser.add_argument("--jobs", type=int, default=200, help="jobs submitted at once")
    parser.add_argument(
        "--paced-jobs",
        type=int,
        default=300,
        help="jobs per paced run (p99 is their 1%% slowest: with 100 it is the slowest alone)",
    )
    parser.add_argument("--rates", default="5,10", help="paced rates, jobs/s (comma-separated)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument(
        "--only", help="trainops or training-operator (comma-separated): measure just those"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another source tree of trainops (e.g. `git archive` of the commit before a "
        "change), measured as a third contender, `trainops-before`, in the same rounds",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="DIR",
        help="run this tree's controller under benchmarks/traced_controller.py and write its "
        "timeline and the jobs' stamps of each run into DIR (benchmarks/trace_tail.py)",
    )
    parser.add_argument(
        "--run-seconds",
        default="0,2",
        help="how long a chief runs once its job's four replicas run, comma-separated, each "
        "measured in every round (default 0,2: 0 exits at once, so a job can be over before any "
        "batched status write of its progress; 2 exits a job whose Running status was written)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
