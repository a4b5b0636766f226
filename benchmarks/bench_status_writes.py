"""What a CRD's validation costs each status write (run by hand; results go to docs/PERFORMANCE.md).

    .venv/bin/python benchmarks/bench_status_writes.py --kubeconfig FILE [--writes 300]
                                                       [--variants shipped,no-cel]

kube-apiserver validates a `PUT .../status` of a custom resource against the whole CRD schema,
`x-kubernetes-validations` of `spec` included (the status strategy copies the stored spec into
the new object and runs every CEL rule on it, with the old object for transition rules;
ratcheting only turns failures on unchanged nodes into warnings, it does not skip the
evaluation). This measures that cost alone: each variant of the TensorFlowTrainingJob CRD is
installed under a group of its own (`<variant>.bench.trainops.dev`, so all variants coexist and
the writes can alternate), one job of the bench's shape (chief, two workers, ps) is created per
variant, and then the variants take turns, one serial status write each, `--writes` times.
Reported per variant: p50 / p90 / p99 / max of the write's round trip, in this process's clock,
and kube-apiserver's CPU per write (from /proc, when it runs on this machine). Both move with
the machine's load (at load 9–13 they did not separate variants 10 % apart): run it on a quiet
machine, or compare kube-apiserver CPU profiles (`kubectl get --raw
'/debug/pprof/profile?seconds=15'` while one variant is written, `go tool pprof -top -cum`).

Variants: `shipped` (deploy/crds as generated), `no-cel` (every x-kubernetes-validations
removed), `no-transition` (only the rules without oldSelf), `transition-only`, and
`NAME=FILE`: another TensorFlowTrainingJob CRD file as it is (e.g. an older generation, to
compare two versions of the rules in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import bench_controller as bc  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from kube import errors, resources  # noqa: E402
from kube.client import Client  # noqa: E402

CRD_FILE = REPO / "deploy" / "crds" / "batch.tensorstack.dev_tensorflowtrainingjobs.yaml"
NAMESPACE = f"bench-status-writes-{os.getpid()}"
BLOCK = 50


def _walk(node: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        fn(node)
        for value in node.values():
            _walk(value, fn)
    elif isinstance(node, list):
        for value in node:
            _walk(value, fn)


def _keep_rules(keep: Callable[[dict[str, str]], bool]) -> Callable[[dict[str, Any]], None]:
    def edit(node: dict[str, Any]) -> None:
        rules = node.get("x-kubernetes-validations")
        if rules is None:
            return
        kept = [r for r in rules if keep(r)]
        if kept:
            node["x-kubernetes-validations"] = kept
        else:
            del node["x-kubernetes-validations"]

    return edit


VARIANTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "shipped": lambda node: None,
    "no-cel": _keep_rules(lambda r: False),
    "no-transition": _keep_rules(lambda r: "oldSelf" not in r["rule"]),
    "transition-only": _keep_rules(lambda r: "oldSelf" in r["rule"]),
}


def variant_crd(variant: str) -> tuple[dict[str, Any], resources.Resource]:
    """The CRD of the variant under a group of its own, its rules edited as its name says."""
    name, _, path = variant.partition("=")
    crd_file = Path(path) if path else CRD_FILE
    docs = [d for d in yaml.safe_load_all(crd_file.read_text()) if d]
    crd = copy.deepcopy(docs[0])
    group = f"{name}.bench.trainops.dev"
    plural = crd["spec"]["names"]["plural"]
    crd["metadata"] = {"name": f"{plural}.{group}"}
    crd["spec"]["group"] = group
    for version in crd["spec"]["versions"]:
        _walk(version["schema"], VARIANTS.get(name, VARIANTS["shipped"]))
    version = crd["spec"]["versions"][0]["name"]
    return crd, resources.Resource(group, version, plural, crd["spec"]["names"]["kind"], True)


def _status(i: int) -> dict[str, Any]:
    """A status of the size the controller writes while a job runs; it changes every write."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def task(rtype: str, count: int) -> dict[str, Any]:
        return {
            "type": rtype,
            "restartCount": 0,
            "replicas": [
                {
                    "name": f"job-0000-{rtype}-{n}",
                    "uid": f"{i:08d}-0000-0000-0000-00000000000{n}",
                    "phase": "Running",
                    "restartCount": 0,
                    "containers": [{"name": "tensorflow", "state": "Running"}],
                }
                for n in range(count)
            ],
        }

    return {
        "phase": "Running",
        "conditions": [
            {
                "type": "Initialized",
                "status": "True",
                "reason": "PodsCreated",
                "message": f"all pods created ({i})",
                "lastTransitionTime": now,
                "lastUpdateTime": now,
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "PodsRunning",
                "message": f"write {i}",
                "lastTransitionTime": now,
                "lastUpdateTime": now,
            },
        ],
        "tasks": [task("chief", 1), task("worker", 2), task("ps", 1)],
        "aggregate": {"running": 4},
        "readyReplicas": "4/4",
        "observedGeneration": 1,
        "startTime": now,
    }


async def _install(client: Client, kubeconfig: Path, names: list[str]) -> dict[str, Any]:
    out = {}
    work = Path(tempfile.mkdtemp(prefix="bench-status-writes-"))
    for name in names:
        crd, resource = variant_crd(name)
        path = work / f"{resource.group}.yaml"
        path.write_text(yaml.safe_dump(crd))
        bc.subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "--server-side", "-f", str(path)],
            check=True,
            capture_output=True,
        )
        out[name] = resource
    deadline = time.monotonic() + 60
    for resource in out.values():
        while True:
            try:
                await client.list(resource, NAMESPACE, limit=1)
                break
            except errors.APIError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    return out


async def main_async(args: argparse.Namespace) -> None:
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS and "=" not in n]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    client = await Client.connect(args.kubeconfig, timeout=30)
    kinds: dict[str, resources.Resource] = {}
    try:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(resources.NAMESPACES, ns)
        kinds.update(await _install(client, args.kubeconfig, names))
        jobs: dict[str, dict[str, Any]] = {}
        for name, resource in kinds.items():
            job = bc._job(0, NAMESPACE)
            job["apiVersion"] = f"{resource.group}/{resource.version}"
            job["metadata"]["name"] = f"status-{os.getpid()}"
            jobs[name] = await client.create(resource, job)
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, float] = dict.fromkeys(names, 0.0)
        api_pid = bc._reference_pids(args.kubeconfig).get("API server")
        load0 = os.getloadavg()[0]
        # Blocks of BLOCK writes per variant, the variants taking turns (the order flipping), so
        # kube-apiserver's CPU can be read per variant; within a block the writes are serial.
        for i in range(0, args.writes, BLOCK):
            order = names if (i // BLOCK) % 2 == 0 else list(reversed(names))
            for name in order:
                cpu0 = bc._cpu_seconds(api_pid) if api_pid else 0.0
                for n in range(i, min(i + BLOCK, args.writes)):
                    body = dict(jobs[name])
                    body["status"] = _status(n)
                    t0 = time.perf_counter()
                    jobs[name] = await client.replace(kinds[name], body, subresource="status")
                    times[name].append((time.perf_counter() - t0) * 1000)
                if api_pid:
                    cpu[name] += bc._cpu_seconds(api_pid) - cpu0
        load1 = os.getloadavg()[0]
        for name, resource in kinds.items():
            await client.delete(resource, jobs[name]["metadata"]["name"], NAMESPACE)
    finally:
        await client.close()
        # The variants' CRDs and the namespace go too (the API server is shared with others).
        crds = [f"{r.plural}.{r.group}" for r in kinds.values()]
        bc.subprocess.run(
            ["kubectl", "--kubeconfig", str(args.kubeconfig), "delete", "--wait=false"]
            + [f"customresourcedefinition/{c}" for c in crds]
            + [f"namespace/{NAMESPACE}"],
            capture_output=True,
            check=False,
        )
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; load {load0:.1f} → {load1:.1f}")
    print(f"{args.writes} serial status writes per variant, in alternating blocks of {BLOCK}")
    print("| CRD variant | p50 | p90 | p99 | max (ms) | kube-apiserver CPU per write (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        t = times[name]
        cells = " | ".join(f"{bc._pct(t, q):.1f}" for q in (0.5, 0.9, 0.99))
        per_write = f"{cpu[name] / len(t) * 1000:.2f}" if api_pid else "n/a (not on this machine)"
        print(f"| {name.partition('=')[0]} | {cells} | {max(t):.1f} | {per_write} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, metavar="FILE")
    parser.add_argument("--writes", type=int, default=300, help="status writes per variant")
    parser.add_argument("--variants", default="shipped,no-cel", help="comma-separated")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
