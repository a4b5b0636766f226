"""Benchmark the admission webhook against a bare aiohttp HTTPS floor (run by hand).

    .venv/bin/python benchmarks/bench_webhook.py [--duration 10] [--conns 1,8,64]

Needs `wrk` (Debian: apt-get install -y wrk). Starts, as separate processes on loopback:
- the webhook, exactly as deployed (`python -m trainops webhook --cert-dir …`), with the rules
  compiled as the image compiles them (hack/compiled-tree; `--source`: this tree as it is);
- the floor (benchmarks/floor_server.py): same TLS context, same certificate, reads the body and
  returns a constant AdmissionReview;
then, per endpoint and connection count, runs `wrk -t1 -cN -dD --latency` with a keep-alive POST
of a real AdmissionReview (benchmarks/post.lua) against the floor and the webhook, alternately,
and prints req/s, p50, p99 and the webhook/floor ratios as a Markdown table. Finally it drives
~100k requests at the webhook in rounds and samples its resident memory after each round.

Results with the machine they ran on go in docs/WEBHOOK.md ("Performance").

    .venv/bin/python benchmarks/bench_webhook.py --flood [--duration 15] [--flood-conns 32]

measures instead (no wrk needed) what a flood of large reviews does to a normal one: one
client sends a normal /validate review at a time while `--flood-conns` connections each send
UPDATE reviews carrying two 1.5 MiB objects back to back (from 127.0.0.2); it prints the normal review's p50,
p99 and max latency without and with the flood, the flood's answers by status, and the
webhook's largest resident memory (sampled every 100 ms). Results: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import policies  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from certs import pki  # noqa: E402

# On a multi-core machine the servers share one CPU and wrk gets another, so both servers meet
# the same contention; without taskset everything floats.
_PIN_SERVER = (
    ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
)
_PIN_CLIENT = ["taskset", "-c", "0"] if _PIN_SERVER else []

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
_URL_PATHS = {"shell": "validate"}
_LABELS = {"shell": "/validate, unchecked kind"}


@dataclass(frozen=True)
class Result:
    rps: float
    p50: float  # seconds
    p99: float
    requests: int
    errors: int
    cpu_us: float = 0.0  # server CPU time (user + system) per request, microseconds


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _median(results: list[Result]) -> Result:
    def mid(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return Result(
        rps=mid([r.rps for r in results]),
        p50=mid([r.p50 for r in results]),
        p99=mid([r.p99 for r in results]),
        requests=sum(r.requests for r in results),
        errors=sum(r.errors for r in results),
        cpu_us=mid([r.cpu_us for r in results]),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, ctx: ssl.SSLContext, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on {port} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(
                f"https://localhost:{port}/healthz", context=ctx, timeout=2
            ):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server on {port} did not become healthy")


def _review(obj: dict, operation: str = "CREATE") -> dict:
    gvk = {"group": "batch.tensorstack.dev", "version": "v1beta1", "kind": obj["kind"]}
    gvr = {
        "group": "batch.tensorstack.dev",
        "version": "v1beta1",
        "resource": obj["kind"].lower() + "s",
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": obj["metadata"]["name"],
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def _bodies(tmp: Path) -> dict[str, Path]:
    import yaml

    job = yaml.safe_load((ROOT / "examples" / "tensorflow-mnist.yaml").read_text())
    job["metadata"]["namespace"] = "default"
    defaulted, _ = policies.default(job)
    out = {}
    # /mutate gets the job as written (a patch comes back); /validate the defaulted job (allowed).
    # "shell": the same review (30 bytes shorter) under a kind the webhook does not check
    # (skipped with a warning): JSON, envelope, metrics and response without any rule — the
    # ceiling of the HTTP shell.
    other = {**defaulted, "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    for endpoint, obj in (("mutate", job), ("validate", defaulted), ("shell", other)):
        path = tmp / f"{endpoint}.json"
        path.write_text(json.dumps(_review(obj)))
        out[endpoint] = path
    return out


def _seconds(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        raise ValueError(f"cannot parse wrk duration {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _wrk(url: str, body: Path, conns: int, duration: float, pid: int | None = None) -> Result:
    cmd = [
        *_PIN_CLIENT,
        "wrk",
        "-t1",
        f"-c{conns}",
        f"-d{duration:g}s",
        "--latency",
        "-s",
        str(ROOT / "benchmarks" / "post.lua"),
        url,
    ]
    cpu_before = _cpu_seconds(pid) if pid else 0.0
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True, env={**os.environ, "BODY_FILE": str(body)}
    ).stdout
    cpu = _cpu_seconds(pid) - cpu_before if pid else 0.0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _seconds(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _seconds(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = 0
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors += sum(int(x) for x in m.groups())
    return Result(rps, p50, p99, requests, errors, cpu / max(requests, 1) * 1e6)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _start_webhook(tmp: Path, port: int, code: Path) -> subprocess.Popen[bytes]:
    """The webhook as `trainops webhook` runs, from the tree `code` (see `_code_tree`)."""
    return subprocess.Popen(
        [
            *_PIN_SERVER,
            sys.executable,
            "-m",
            "trainops",
            "webhook",
            "--cert-dir",
            str(tmp),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "WARNING",
        ],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
    )


def _code_tree(tmp: Path, source: bool) -> Path:
    """Where the webhook's code comes from: this tree with the rules compiled as the image
    compiles them (hack/compiled-tree), or with `source` this tree as it is (pure Python)."""
    if source:
        return ROOT
    build = tmp / "compiled"
    subprocess.run([str(ROOT / "hack" / "compiled-tree"), str(build)], check=True)
    return build / "tree"


def _large_update(tmp: Path) -> bytes:
    """An UPDATE review of a job at etcd's 1.5 MiB object limit (object and old object)."""
    import yaml

    job = yaml.safe_load((ROOT / "examples" / "tensorflow-mnist.yaml").read_text())
    job["metadata"]["namespace"] = "default"
    job, _ = policies.default(job)
    job["metadata"]["annotations"] = {"bulk": "x" * (1536 * 1024 - 4096)}
    sent = _review(job, "UPDATE")
    sent["request"]["oldObject"] = job
    return json.dumps(sent).encode()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def flood_worker(spec: str) -> int:
    """The flooding side (its own process): print the answers by status as JSON."""
    import asyncio

    import aiohttp

    url, cafile, body_file, duration, conns = spec.split()
    body = Path(body_file).read_bytes()
    ctx = ssl.create_default_context(cafile=cafile)
    codes: dict[int, int] = {}

    async def one(session: aiohttp.ClientSession, until: float) -> None:
        while time.monotonic() < until:
            try:
                headers = {"Content-Type": "application/json"}
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    codes[resp.status] = codes.get(resp.status, 0) + 1
            except (aiohttp.ClientError, TimeoutError):
                codes[0] = codes.get(0, 0) + 1

    async def run() -> None:
        # From another address than the normal reviews: the webhook caps connections per
        # source (50) and gives a source over it the slots of its own idle ones.
        connector = aiohttp.TCPConnector(ssl=ctx, limit=0, local_addr=("127.0.0.2", 0))
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            until = time.monotonic() + float(duration)
            await asyncio.gather(*(one(session, until) for _ in range(int(conns))))

    asyncio.run(run())
    print(json.dumps(codes))
    return 0


def flood(args: argparse.Namespace) -> int:
    """A normal review's latency while large reviews flood the webhook (docs/PERFORMANCE.md)."""
    import asyncio

    import aiohttp

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-flood-"))
    ca = pki.new_ca()
    pki.write_bundle(tmp, ca, pki.new_serving_cert(ca, []))
    normal = _bodies(tmp)["validate"].read_bytes()
    large = _large_update(tmp)
    ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    port = _free_port()
    webhook = _start_webhook(tmp, port, _code_tree(tmp, args.source))
    url = f"https://127.0.0.1:{port}/validate"
    headers = {"Content-Type": "application/json"}

    async def probe(session: aiohttp.ClientSession, until: float) -> list[float]:
        latencies = []
        while time.monotonic() < until:
            started = time.perf_counter()
            async with session.post(url, data=normal, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            latencies.append(time.perf_counter() - started)
        return latencies

    async def sample(until: float, rss: list[int]) -> None:
        while time.monotonic() < until:
            rss.append(_rss_kib(webhook.pid))
            await asyncio.sleep(0.1)

    async def run() -> dict[str, object]:
        timeout = aiohttp.ClientTimeout(total=30)
        connector = aiohttp.TCPConnector(ssl=ctx, limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await probe(session, time.monotonic() + 2)  # warm up
            idle_rss = _rss_kib(webhook.pid)
            quiet = await probe(session, time.monotonic() + args.duration)
            # The flood comes from another process, so its own work (TLS, 3 MiB writes) does
            # not delay this loop's probe.
            large_file = tmp / "large.json"
            large_file.write_bytes(large)
            worker = await asyncio.create_subprocess_exec(
                *_PIN_CLIENT,
                sys.executable,
                __file__,
                "--flood-worker",
                f"{url} {tmp / 'ca.crt'} {large_file} {args.duration} {args.flood_conns}",
                stdout=asyncio.subprocess.PIPE,
            )
            await asyncio.sleep(1.0)  # the flood is under way
            rss: list[int] = []
            until = time.monotonic() + args.duration - 2
            flooded, _ = await asyncio.gather(probe(session, until), sample(until, rss))
            stdout, _ = await worker.communicate()
            return {
                "idle_rss_kib": idle_rss,
                "quiet": quiet,
                "flooded": flooded,
                "codes": json.loads(stdout.decode() or "{}"),
                "max_rss_kib": max(rss),
            }

    try:
        _wait_healthy(port, ctx, webhook)
        out = asyncio.run(run())
    finally:
        webhook.terminate()
        webhook.wait(timeout=20)
    quiet, flooded = out["quiet"], out["flooded"]
    assert isinstance(quiet, list) and isinstance(flooded, list)
    for label, values in (("no flood", quiet), (f"flood of {args.flood_conns}", flooded)):
        print(
            f"normal /validate, {label:12}: {len(values)} reviews, p50 "
            f"{_percentile(values, 0.5) * 1e3:.1f} ms, p99 {_percentile(values, 0.99) * 1e3:.1f} "
            f"ms, max {max(values) * 1e3:.1f} ms"
        )
    print(f"large reviews ({len(large)} bytes) answered by status: {out['codes']}")
    print(
        f"webhook RSS: idle {out['idle_rss_kib']} KiB, max during the flood {out['max_rss_kib']} KiB"
    )
    print(f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    parser.add_argument("--conns", default="1,8,64", help="connection counts")
    parser.add_argument(
        "--endpoints",
        default="validate,mutate,shell",
        help="shell = /validate of an unchecked kind (nearly the same body): the shell's own cost",
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per cell (median)")
    parser.add_argument("--rss-requests", type=int, default=100_000)
    parser.add_argument("--json", type=Path, help="also write raw results here")
    parser.add_argument("--flood", action="store_true", help="measure a flood of large reviews")
    parser.add_argument("--flood-conns", type=int, default=32)
    parser.add_argument(
        "--source",
        action="store_true",
        help="serve the webhook from this tree as it is (pure Python), not with the rules "
        "compiled as the image has them (hack/compiled-tree)",
    )
    parser.add_argument("--flood-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood_worker:
        return flood_worker(args.flood_worker)
    if args.flood:
        return flood(args)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install -y wrk", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    ca = pki.new_ca()
    pki.write_bundle(tmp, ca, pki.new_serving_cert(ca, []))
    bodies = _bodies(tmp)
    ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    wport, fport = _free_port(), _free_port()
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    webhook = _start_webhook(tmp, wport, _code_tree(tmp, args.source))
    floor = subprocess.Popen(
        [*_PIN_SERVER, py, str(ROOT / "benchmarks" / "floor_server.py"), str(tmp), str(fport)],
        cwd=ROOT,
        env=env,
    )
    rows: list[dict] = []
    try:
        _wait_healthy(wport, ctx, webhook)
        _wait_healthy(fport, ctx, floor)
        for endpoint in args.endpoints.split(","):
            body = bodies[endpoint]
            url_path = _URL_PATHS.get(endpoint, endpoint)
            # warm both (imports, caches) before measuring
            _wrk(f"https://127.0.0.1:{fport}/{url_path}", body, 8, 2)
            _wrk(f"https://127.0.0.1:{wport}/{url_path}", body, 8, 2)
            for conns in (int(c) for c in args.conns.split(",")):
                fs, ws = [], []
                for _ in range(args.repeat):  # alternate, so drifting background load hits both
                    fs.append(
                        _wrk(
                            f"https://127.0.0.1:{fport}/{url_path}",
                            body,
                            conns,
                            args.duration,
                            floor.pid,
                        )
                    )
                    ws.append(
                        _wrk(
                            f"https://127.0.0.1:{wport}/{url_path}",
                            body,
                            conns,
                            args.duration,
                            webhook.pid,
                        )
                    )
                f, w = _median(fs), _median(ws)
                rows.append(
                    {
                        "endpoint": endpoint,
                        "conns": conns,
                        "floor": f.__dict__,
                        "webhook": w.__dict__,
                    }
                )
                print(
                    f"{endpoint:8} c={conns:<3} floor {f.rps:8.0f} req/s p50 {f.p50 * 1e3:6.2f} ms p99 {f.p99 * 1e3:6.2f} ms | "
                    f"webhook {w.rps:8.0f} req/s p50 {w.p50 * 1e3:6.2f} ms p99 {w.p99 * 1e3:6.2f} ms | "
                    f"x{w.rps / f.rps:.2f} thr, x{w.p99 / f.p99:.2f} p99, CPU/req {f.cpu_us:.0f} vs {w.cpu_us:.0f} us, errors {w.errors}",
                    flush=True,
                )

        # Memory over ~100k requests: rounds of wrk, RSS sampled after each.
        samples = [_rss_kib(webhook.pid)]
        done = 0
        while done < args.rss_requests:
            r = _wrk(f"https://127.0.0.1:{wport}/validate", bodies["validate"], 8, 5, webhook.pid)
            done += r.requests
            samples.append(_rss_kib(webhook.pid))
        print(f"webhook RSS over {done} requests (KiB): {samples}")
    finally:
        for proc in (webhook, floor):
            proc.terminate()
            proc.wait(timeout=20)

    print()
    pinning = "servers pinned to CPU 1, wrk to CPU 0" if _PIN_SERVER else "no CPU pinning"
    print(
        f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}; wrk -t1, "
        f"{args.duration:g}s per run, median of {args.repeat} alternating runs; {pinning}; "
        f"rules {'interpreted (--source)' if args.source else 'compiled (as in the image)'}"
    )
    print()
    print(
        "| endpoint | conns | floor req/s | webhook req/s | ratio | floor p50 / p99 (ms) | webhook p50 / p99 (ms) | p99 ratio | CPU µs/req floor / webhook |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        f, w = row["floor"], row["webhook"]
        print(
            f"| {_LABELS.get(row['endpoint'], '/' + row['endpoint'])} | {row['conns']} | {f['rps']:.0f} | {w['rps']:.0f} | {w['rps'] / f['rps']:.2f} | "
            f"{f['p50'] * 1e3:.2f} / {f['p99'] * 1e3:.2f} | {w['p50'] * 1e3:.2f} / {w['p99'] * 1e3:.2f} | {w['p99'] / f['p99']:.2f} | {f['cpu_us']:.0f} / {w['cpu_us']:.0f} |"
        )
    print()
    if len(samples) > 1:
        print(
            f"RSS (KiB) after each round: first {samples[0]}, after warm-up {samples[1]}, "
            f"last {samples[-1]}, max {max(samples)}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "rss_kib": samples, "requests": done}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
