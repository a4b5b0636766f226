"""Script mode: `python -m tests.fidelity.run --reference KUBECONFIG [--embedded KUBECONFIG]`.

Prints one row per workflow (steps identical / accepted / different) and the share of steps
identical; `--diff` adds each differing step's command and output diff. Without `--embedded`,
an embedded API server is started in a temporary directory for the run. Exits 1 when a
difference is not declared (or a declared one no longer occurs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.fidelity.compare import describe, table
from tests.fidelity.runner import Target
from tests.fidelity.suite import prepare, run_suite
from tests.fidelity.workflows import WORKFLOWS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fidelity.run", description=__doc__)
    parser.add_argument("--reference", type=Path, required=True, help="a real cluster's kubeconfig")
    parser.add_argument("--embedded", type=Path, help="the embedded server's kubeconfig")
    parser.add_argument("--workflow", action="append", help="run only these (repeatable)")
    parser.add_argument("--diff", action="store_true", help="print the differing steps")
    parser.add_argument("--all-diffs", action="store_true", help="also accepted differences")
    args = parser.parse_args(argv)
    chosen = [w for w in WORKFLOWS if not args.workflow or w.name in args.workflow]
    unknown = set(args.workflow or ()) - {w.name for w in WORKFLOWS}
    if unknown:
        parser.error(f"unknown workflow(s): {', '.join(sorted(unknown))}")
    if not args.reference.is_file():
        parser.error(f"--reference {args.reference}: no such file")

    server = None
    embedded_config = args.embedded
    if embedded_config is None:
        from tests.support.cluster import BackgroundApiServer

        server = BackgroundApiServer(Path(tempfile.mkdtemp(prefix="fid-embedded-")))
        embedded_config = server.server.kubeconfig
    try:
        reference = Target("reference", args.reference)
        embedded = Target("embedded", embedded_config)
        prepare(reference, embedded)
        results = run_suite(reference, embedded, chosen)
    finally:
        if server is not None:
            server.stop()
    if args.diff or args.all_diffs:
        for workflow in chosen:
            text = describe(workflow, results[workflow.name], only_failed=not args.all_diffs)
            if text:
                print(text, end="\n\n")
    print(table(results))
    failed = any(v.failed for verdicts in results.values() for v in verdicts)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
