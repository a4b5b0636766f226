"""`trainops controller`: run the training-job controller against a cluster.

Argument parsing and wiring only: `controller.manager.Controller` does the work, reaching the
API server through `kube.Client` (in-cluster configuration by default, `--kubeconfig` else).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from trainops.commands.up_args import port_number

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "controller",
        help="run the training-job controller (pods, services, restarts, status)",
        description="Reconcile every TensorFlowTrainingJob and XGBoostTrainingJob: create their "
        "replica pods and services, restart, time out, clean up, pause and resume them, and keep "
        "their .status. Several replicas elect one leader through a Lease (a standby waits, logging "
        "that it does, until the leader's lease is released or expires). Ctrl-C or SIGTERM "
        "stops it cleanly (the lease is released).",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster credentials, else $KUBECONFIG)",
    )
    parser.add_argument("--workers", type=int, default=4, help="concurrent reconciles (default 4)")
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=300.0,
        help="enqueue every job again this often (default 300)",
    )
    parser.add_argument(
        "--bind", default="0.0.0.0", help="address of /metrics, /healthz, /readyz (default 0.0.0.0)"
    )
    parser.add_argument(
        "--port",
        type=port_number(allow_zero=True),
        default=8080,
        help="port of /metrics, /healthz, /readyz (default 8080; 0 picks a free one)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one active controller through a coordination.k8s.io Lease (default: on)",
    )
    parser.add_argument(
        "--lease-namespace", default="kube-system", help="namespace of the Lease (kube-system)"
    )
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.workers < 1:
        print("trainops controller: --workers must be at least 1", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args))
    except OSError as exc:
        print(f"trainops controller: {exc}", file=sys.stderr)
        return 1


def _settle_garbage_collector() -> None:
    """Keep the collector's pauses off the reaction time (docs/PERFORMANCE.md): what is loaded
    by now (modules and their objects: a full collection of them took tens of ms) is moved out
    of the collector's sight, and young collections run every 10,000 allocations instead of
    every 700 — a reconcile parses JSON, which allocates in bursts.
    Reference counting still frees everything as soon as it is unused."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


async def _main(args: argparse.Namespace) -> int:
    from aiohttp import web

    from controller.manager import Controller, ControllerSettings
    from controller.server import create_app
    from trainops.commands import kubeconnect

    try:
        # Checked once at start (a wrong file or server is one line); later outages are retried.
        client = await kubeconnect.connect(
            Path(args.kubeconfig).expanduser() if args.kubeconfig else None,
            field_manager="trainops",
            probe="/api/v1/pods",
            command="trainops controller",
        )
    except kubeconnect.StartError as exc:
        print(f"trainops controller: {exc}", file=sys.stderr)
        return 1
    controller = Controller(
        client,
        ControllerSettings(
            workers=args.workers,
            resync_seconds=args.resync_seconds,
            leader_election=args.leader_elect,
            lease_namespace=args.lease_namespace,
        ),
    )
    runner = web.AppRunner(create_app(controller.metrics.registry, controller.problems))
    await runner.setup()
    site = web.TCPSite(runner, args.bind, args.port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else args.port
        logging.getLogger("trainops").info(
            "controller serving /metrics, /healthz, /readyz on %s:%s", args.bind, port
        )
        controller.start()
        _settle_garbage_collector()
        await stopping.wait()
    finally:
        await controller.stop()
        await runner.cleanup()
        await client.close()
    return 0
