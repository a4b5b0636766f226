"""The webhook under 1,000 slow connections (issue 29; run by hand).

    .venv/bin/python benchmarks/bench_webhook_slow.py [--slow 1000] [--duration 20] [--silent]

Starts the webhook as `trainops webhook` runs (this tree, default limits), then:
1. quiet: an API-server-like client on 127.0.0.1 sends one /validate review at a time, each on
   a new TLS connection (the worst case: every review needs a free slot), for `--duration` s;
2. attacked: a second process keeps `--slow` TLS connections open from 127.0.0.2 onwards (50
   per source address, the default per-source cap), each sending the issue's
   `POST /validate HTTP/1.1\\r\\nHost: x\\r\\n` and nothing more, and opens a new one whenever the
   webhook closes one — while the same client measures again. With `--silent` the connections
   are plain TCP that never send a ClientHello (the handshake caps, `kube.handshakes`).
Prints the reviews' latency (p50, p99, max) and failures in both phases, how the webhook closed
the slow connections (seconds after opening: evicted at once, or cut at the 5 s head
deadline), how many it closed per second, and its resident memory and CPU. Results:
docs/WEBHOOK.md and docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_webhook import (  # noqa: E402
    _PIN_CLIENT,
    _bodies,
    _cpu_seconds,
    _free_port,
    _percentile,
    _rss_kib,
    _start_webhook,
    _wait_healthy,
)
from benchmarks.machine import cpu_model  # noqa: E402
from certs import pki  # noqa: E402

SLOWLORIS = b"POST /validate HTTP/1.1\r\nHost: x\r\n"
PER_SOURCE = 50


def attacker(spec: str) -> int:
    """Keep `slow` slow connections for `duration` s; print how long each lasted, as JSON."""
    port, cafile, slow, duration, silent = spec.split()
    ctx = ssl.create_default_context(cafile=cafile)
    lasted: list[float] = []
    failed = 0

    async def keep_one(source: str, until: float) -> None:
        nonlocal failed
        while time.monotonic() < until:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1",
                    int(port),
                    ssl=None if silent == "1" else ctx,
                    server_hostname=None if silent == "1" else "localhost",
                    local_addr=(source, 0),
                )
            except OSError:
                failed += 1
                await asyncio.sleep(0.1)
                continue
            opened = time.monotonic()
            if silent != "1":
                writer.write(SLOWLORIS)
            try:
                async with asyncio.timeout(max(0.0, until - opened)):
                    await reader.read()
                lasted.append(time.monotonic() - opened)
            except (TimeoutError, OSError):
                pass
            writer.transport.abort()

    async def run() -> None:
        until = time.monotonic() + float(duration)
        n = int(slow)
        sources = [
            f"127.0.{2 + i // PER_SOURCE // 250}.{2 + (i // PER_SOURCE) % 250}" for i in range(n)
        ]
        await asyncio.gather(*(keep_one(sources[i], until) for i in range(n)))

    asyncio.run(run())
    print(json.dumps({"lasted": lasted, "failed": failed}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=1000, help="slow connections kept open")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument(
        "--silent", action="store_true", help="plain TCP connections that send no ClientHello"
    )
    parser.add_argument("--attacker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attacker:
        return attacker(args.attacker)

    import aiohttp

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-slow-"))
    ca = pki.new_ca()
    pki.write_bundle(tmp, ca, pki.new_serving_cert(ca, []))
    body = _bodies(tmp)["validate"].read_bytes()
    ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    port = _free_port()
    webhook = _start_webhook(tmp, port, ROOT)
    url = f"https://127.0.0.1:{port}/validate"

    async def probe(until: float) -> tuple[list[float], int]:
        latencies: list[float] = []
        failures = 0
        connector = aiohttp.TCPConnector(ssl=ctx, force_close=True, local_addr=("127.0.0.1", 0))
        timeout = aiohttp.ClientTimeout(total=5)  # the API server's timeoutSeconds in deploy/
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            while time.monotonic() < until:
                started = time.perf_counter()
                try:
                    async with session.post(
                        url, data=body, headers={"Content-Type": "application/json"}
                    ) as resp:
                        await resp.read()
                        ok = resp.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    failures += 1
                await asyncio.sleep(0.02)
        return latencies, failures

    async def sample(until: float, rss: list[int]) -> None:
        while time.monotonic() < until:
            rss.append(_rss_kib(webhook.pid))
            await asyncio.sleep(0.2)

    async def run() -> dict[str, Any]:
        await probe(time.monotonic() + 2)  # warm up
        idle_rss = _rss_kib(webhook.pid)
        quiet = await probe(time.monotonic() + args.duration)
        worker = await asyncio.create_subprocess_exec(
            *_PIN_CLIENT,
            sys.executable,
            __file__,
            "--attacker",
            f"{port} {tmp / 'ca.crt'} {args.slow} {args.duration + 3} {int(args.silent)}",
            stdout=asyncio.subprocess.PIPE,
        )
        await asyncio.sleep(3.0)  # the slow connections are open
        cpu = _cpu_seconds(webhook.pid)
        rss: list[int] = []
        until = time.monotonic() + args.duration
        attacked, _ = await asyncio.gather(probe(until), sample(until, rss))
        cpu = _cpu_seconds(webhook.pid) - cpu
        stdout, _ = await worker.communicate()
        return {
            "idle_rss": idle_rss,
            "max_rss": max(rss),
            "quiet": quiet,
            "attacked": attacked,
            "cpu": cpu,
            "attack": json.loads(stdout.decode() or "{}"),
        }

    try:
        _wait_healthy(port, ctx, webhook)
        out = asyncio.run(run())
    finally:
        webhook.terminate()
        webhook.wait(timeout=20)
    for label in ("quiet", "attacked"):
        values, failures = out[label]
        print(
            f"/validate on a new connection each, {label:8}: {len(values)} answered, "
            f"{failures} failed, p50 {_percentile(values, 0.5) * 1e3:.1f} ms, "
            f"p99 {_percentile(values, 0.99) * 1e3:.1f} ms, max {max(values) * 1e3:.1f} ms"
        )
    attack = out["attack"]
    assert isinstance(attack, dict)
    lasted = attack["lasted"]
    at_deadline = [t for t in lasted if t >= 4.5]
    print(
        f"{'silent' if args.silent else 'slow'} connections ({args.slow} kept open by the "
        f"attacker): {len(lasted)} closed by the "
        f"webhook in {args.duration + 3:g} s ({len(lasted) / (args.duration + 3):.0f}/s); "
        f"{len(lasted) - len(at_deadline)} within 4.5 s of opening (evicted, p50 "
        f"{_percentile([t for t in lasted if t < 4.5], 0.5):.2f} s), {len(at_deadline)} at the "
        f"head deadline (max {max(lasted, default=0):.2f} s); {attack['failed']} connects failed"
    )
    print(
        f"webhook: RSS idle {out['idle_rss']} KiB, max under attack {out['max_rss']} KiB; "
        f"CPU {out['cpu']:.1f} s in {args.duration:g} s of attack"
    )
    print(
        f"Machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
