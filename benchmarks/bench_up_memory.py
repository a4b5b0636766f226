"""Memory of an idle `trainops up` holding training jobs (run by hand; results go to
docs/PERFORMANCE.md, "Process kubelet and `trainops up`").

    .venv/bin/python benchmarks/bench_up_memory.py [--jobs 300] [--source DIR]

Starts `trainops up` on a fresh data directory (the code in `--source`, default this checkout:
point it at another worktree to compare two versions with the same interpreter), reads its
VmRSS after it settles with no jobs, then creates N paused TensorFlowTrainingJobs (a chief, four
workers, two parameter servers and an evaluator; paused, so no pod runs) and reads it again
after they settle. Every job is held by the embedded API server and by each cache that reads
jobs (the controller's and GitOps': one shared cache since kube.Manager).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kube import Client, resources  # noqa: E402
from tests.support.jobs import all_types_tf_job  # noqa: E402

SETTLE_SECONDS = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to run up from")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-up-memory-"))
    env = {**os.environ, "PYTHONPATH": str(args.source.resolve())}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(data)],
        cwd=args.source,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for_banner(proc)
        asyncio.run(_measure(proc.pid, data / "kubeconfig", args.jobs))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(data, ignore_errors=True)


def _wait_for_banner(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    for line in proc.stdout:
        if "trainops is up" in line:
            return
        if time.monotonic() > deadline:
            break
    raise SystemExit("trainops up did not start within 120 s")


async def _measure(pid: int, kubeconfig: Path, jobs: int) -> None:
    client = await Client.connect(kubeconfig)
    try:
        await asyncio.sleep(
            SETTLE_SECONDS
        )  # a settle time, measured as such: not a wait for a condition
        print(f"idle, no jobs            RSS {_rss_mib(pid)} MiB", flush=True)
        for i in range(jobs):
            job = all_types_tf_job(f"j{i:05d}")
            job["metadata"]["namespace"] = "default"
            job["spec"]["runMode"] = {"pause": {"enabled": True}}
            await client.create(resources.TFJOBS, job)
        await asyncio.sleep(SETTLE_SECONDS)
        print(f"idle, {jobs} paused jobs  RSS {_rss_mib(pid)} MiB", flush=True)
    finally:
        await client.close()


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


if __name__ == "__main__":
    main()
