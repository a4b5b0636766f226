"""Benchmark of the embedded API server (run by hand; results go to docs/LOCALCLUSTER.md).

    .venv/bin/python benchmarks/bench_apiserver.py [--pods 10000] [--concurrency 16]

Starts `trainops apiserver` as a separate process on a fresh data dir (so client and server do
not share a GIL), then measures over HTTPS with a bearer token, as kubectl would:
create / get throughput for N pods, LIST latency of all N pods (JSON and Table), and watch
delivery latency: for each of 200 sequential writes, the arrival of the matching watch event
relative to the write's response (negative: the event came first) and to the request being sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "", "labels": {"app": "bench", "tier": "batch"}},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", "sleep 3600"],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ]
    },
}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1000:.2f} ms, p99 {_pct(values, 0.99) * 1000:.2f} ms, "
        f"max {max(values) * 1000:.2f} ms"
    )


async def _wait_ready(data_dir: Path, proc: subprocess.Popen[bytes]) -> tuple[str, str, Path]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"apiserver exited with {proc.returncode}")
        port_file = data_dir / "server.json"
        if (data_dir / "kubeconfig").exists() and port_file.exists():
            port = json.loads(port_file.read_text())["port"]
            return (
                f"https://127.0.0.1:{port}",
                (data_dir / "token").read_text().strip(),
                data_dir / "pki" / "ca.crt",
            )
        await asyncio.sleep(0.1)
    raise SystemExit("apiserver did not start within 30 s")


async def bench(pods: int, concurrency: int) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-apiserver-"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(data_dir)],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    results: dict[str, Any] = {}
    try:
        url, token, ca = await _wait_ready(data_dir, proc)
        ctx = ssl.create_default_context(cafile=str(ca))
        headers = {"Authorization": f"Bearer {token}"}
        connector = aiohttp.TCPConnector(ssl=ctx, limit=concurrency + 4)
        async with aiohttp.ClientSession(url, headers=headers, connector=connector) as session:
            base = "/api/v1/namespaces/default/pods"
            names = [f"pod-{i:05d}" for i in range(pods)]
            queue: asyncio.Queue[str] = asyncio.Queue()

            async def worker(op: str) -> None:
                while not queue.empty():
                    name = queue.get_nowait()
                    if op == "create":
                        body = {**POD, "metadata": {**POD["metadata"], "name": name}}
                        async with session.post(base, json=body) as r:
                            assert r.status == 201, await r.text()
                            await r.read()
                    else:
                        async with session.get(f"{base}/{name}") as r:
                            assert r.status == 200
                            await r.read()

            for op in ("create", "get"):
                for n in names:
                    queue.put_nowait(n)
                t0 = time.perf_counter()
                await asyncio.gather(*(worker(op) for _ in range(concurrency)))
                elapsed = time.perf_counter() - t0
                results[op] = (
                    f"{pods / elapsed:.0f} req/s ({pods} in {elapsed:.1f} s, {concurrency} concurrent)"
                )

            for label, accept in (
                ("list (JSON)", "application/json"),
                (
                    "list (Table, as kubectl get)",
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                ),
            ):
                samples = []
                for _ in range(15):
                    t0 = time.perf_counter()
                    async with session.get(base, headers={"Accept": accept}) as r:
                        body = await r.read()
                    samples.append(time.perf_counter() - t0)
                results[f"{label} of {pods} pods"] = f"{_ms(samples)}, {len(body) / 1e6:.1f} MB"

            curl = shutil.which("curl")
            if curl:  # a C client, closer to kubectl than Python decoding 14 MB of TLS
                samples = []
                for _ in range(15):
                    out = subprocess.run(
                        [
                            curl,
                            "-s",
                            "-o",
                            "/dev/null",
                            "-w",
                            "%{time_total}",
                            "--cacert",
                            str(ca),
                            "-H",
                            f"Authorization: Bearer {token}",
                            url + base,
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    samples.append(float(out.stdout))
                results[f"list (JSON, curl) of {pods} pods"] = _ms(samples)

            rv = json.loads(await (await session.get(f"{base}?limit=1")).read())["metadata"][
                "resourceVersion"
            ]
            arrivals: dict[str, float] = {}
            got_event = asyncio.Event()

            async def follow() -> None:
                async with session.get(
                    f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=600"
                ) as r:
                    async for line in r.content:
                        event = json.loads(line)
                        arrivals[event["object"]["metadata"]["name"]] = time.perf_counter()
                        got_event.set()

            watcher = asyncio.create_task(follow())
            await asyncio.sleep(0.5)
            after_response, after_send = [], []
            for i in range(200):
                name = f"watched-{i}"
                body = {**POD, "metadata": {**POD["metadata"], "name": name}}
                got_event.clear()
                sent = time.perf_counter()
                async with session.post(base, json=body) as r:
                    await r.read()
                done = time.perf_counter()
                while name not in arrivals:
                    await asyncio.wait_for(got_event.wait(), 5)
                    got_event.clear()
                after_response.append(arrivals[name] - done)
                after_send.append(arrivals[name] - sent)
            watcher.cancel()
            early = sum(1 for d in after_response if d <= 0)
            results["watch event vs the write's response (negative: event first)"] = (
                f"{_ms(after_response)}; event first in {early}/{len(after_response)} writes"
            )
            results["watch delivery after the write was sent"] = _ms(after_send)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    results["machine"] = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    for key, value in asyncio.run(bench(args.pods, args.concurrency)).items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
