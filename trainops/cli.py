"""The `trainops` command: parses arguments and hands off to one module per subcommand.

Each module in `trainops.commands` exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable `(args) -> int` (the exit code). Modules are imported only when the CLI
starts, and each imports its heavy dependencies inside `func`, so `trainops --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from trainops import __version__

COMMANDS = ("check", "crds", "certs", "webhook", "controller", "apiserver", "up", "repo", "gitops")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainops",
        description="Admission control and GitOps for T9k training jobs on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"trainops {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"trainops.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`trainops check -o json | head`): end quietly, and keep Python
        # from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
