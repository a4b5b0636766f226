"""What the CRD's CEL rules cost kube-apiserver per status write, in process (run by hand).

    .venv/bin/python benchmarks/bench_cel_validator.py [--variants shipped,old=FILE]
                                                       [--each-rule] [--rounds 5]

`benchmarks/bench_status_writes.py` measures a real server, whose CPU per write moves with the
machine's load more than CEL moves it. This runs the server's own validator instead
(`benchmarks/cel_validator`, Go, k8s.io/apiextensions-apiserver v0.32.13 from the module cache
the reference control plane is built from, no network): the call kube-apiserver's status
strategy makes on every status update of a job of the bench's shape (chief, two workers, ps),
with two different statuses as new and old object. Reported per CRD variant (the variants of
bench_status_writes: `shipped`, `no-cel`, `no-transition`, `transition-only`, `NAME=FILE`):
the best of `--rounds` times per write, and allocations and bytes per write, which do not
depend on the load at all. `--each-rule` adds one line per rule of each variant, measured
with that rule alone in the CRD: what the rule costs, planning and field reads included.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import bench_controller as bc  # noqa: E402
from benchmarks import bench_status_writes as bsw  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402

HARNESS = REPO / "benchmarks" / "cel_validator"
GO_ENV = {"GOFLAGS": "-mod=readonly", "GOPROXY": "off", "GOWORK": "off", "CGO_ENABLED": "0"}


def _rules_of(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        found.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
        for value in node.values():
            found.extend(_rules_of(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_rules_of(value))
    return found


def _only(crd: dict[str, Any], rule: str) -> dict[str, Any]:
    """`crd` with every rule but `rule` removed (rules of the same text stay together)."""
    out = copy.deepcopy(crd)
    for version in out["spec"]["versions"]:
        bsw._walk(version["schema"], bsw._keep_rules(lambda r: r["rule"] == rule))
    return out


def _build(tmp: Path) -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    binary = tmp / "cel_validator"
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=HARNESS,
        env={**os.environ, **GO_ENV},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"go build in {HARNESS} failed:\n{done.stderr.strip()}")
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default="shipped", help="comma-separated")
    parser.add_argument("--each-rule", action="store_true", help="also each rule alone")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in bsw.VARIANTS and "=" not in n]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="cel-validator-") as tmp_name:
        tmp = Path(tmp_name)
        job = bc._job(0, "bench")
        job["metadata"]["name"] = "status-writes"
        for which, i in (("new", 2), ("old", 1)):
            (tmp / f"{which}.json").write_text(json.dumps({**job, "status": bsw._status(i)}))
        files: list[tuple[str, Path]] = []
        for name in names:
            crd, _ = bsw.variant_crd(name)
            label = name.partition("=")[0]
            files.append((label, tmp / f"{len(files)}.yaml"))
            files[-1][1].write_text(yaml.safe_dump(crd))
            if args.each_rule:
                for rule in dict.fromkeys(_rules_of(crd)):
                    files.append((f"{label}: `{rule}`", tmp / f"{len(files)}.yaml"))
                    files[-1][1].write_text(yaml.safe_dump(_only(crd, rule)))
        binary = _build(tmp)
        done = subprocess.run(
            [str(binary), "-new", str(tmp / "new.json"), "-old", str(tmp / "old.json")]
            + ["-rounds", str(args.rounds)]
            + [str(path) for _, path in files],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"cel_validator failed:\n{done.stderr.strip()}")
        rows = {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    print("job: chief, 2 workers, ps; one status write (new and old object differ in status)")
    print("| CRD variant (rule) | µs per write (best) | allocations | bytes | errors |")
    print("|---|---:|---:|---:|---:|")
    for label, path in files:
        ns, allocs, size, errors = rows[str(path)]
        cells = f"{int(ns) / 1000:.1f} | {int(allocs):,} | {int(size):,} | {errors}"
        print(f"| {label[:150]} | {cells} |")


if __name__ == "__main__":
    main()
