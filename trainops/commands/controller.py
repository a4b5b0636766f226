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

from trainops.commands import runtime
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
    runtime.add_client_arguments(parser)
    parser.add_argument("--workers", type=int, default=4, help="concurrent reconciles (default 4)")
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=300.0,
        help="enqueue every job again this often (default 300)",
    )
    parser.add_argument(
        "--lost-node-grace",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long a node may be not Ready before the replicas on it count as lost: "
        "restarted elsewhere (counted once) or, under restartPolicy Never, the job fails "
        'naming the node (default 60; docs/CONTROLLER.md, "A lost node")',
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
        "--progress-url",
        metavar="URL",
        help="base URL training pods report progress to, e.g. "
        "https://trainops-controller.trainops-system.svc:8443 (default https://127.0.0.1:PORT; "
        "docs/PROGRESS.md)",
    )
    parser.add_argument(
        "--progress-bind", default="0.0.0.0", help="address of the progress endpoint (0.0.0.0)"
    )
    parser.add_argument(
        "--progress-port",
        type=port_number(allow_zero=True),
        default=0,
        help="port of the progress endpoint, HTTPS (default 0: a free one; deploy/ sets 8443)",
    )
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress endpoint: pods get no TRAINOPS_PROGRESS_* env",
    )
    runtime.add_leader_arguments(parser)
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
    if not args.lost_node_grace >= 0:
        print("trainops controller: --lost-node-grace must be at least 0", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args))
    except OSError as exc:
        print(f"trainops controller: {exc}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace) -> int:
    from controller.manager import Controller, ControllerSettings
    from trainops.commands import kubeconnect

    try:
        # Checked once at start (a wrong file or server is one line); later outages are retried.
        client = await kubeconnect.connect(
            Path(args.kubeconfig).expanduser() if args.kubeconfig else None,
            field_manager="trainops",
            probe="/api/v1/pods",
            command="trainops controller",
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
        )
    except kubeconnect.StartError as exc:
        print(f"trainops controller: {exc}", file=sys.stderr)
        return 1
    manager = runtime.new_manager(
        client, leader_elect=args.leader_elect, lease_namespace=args.lease_namespace
    )
    from controller.progress_server import ProgressSettings

    progress = None
    if getattr(args, "progress", True):
        progress = ProgressSettings(
            url=args.progress_url,
            bind=args.progress_bind,
            port=args.progress_port,
            namespace=args.lease_namespace,
        )
    controller = Controller(
        manager,
        ControllerSettings(
            workers=args.workers,
            resync_seconds=args.resync_seconds,
            lost_node_grace=args.lost_node_grace,
            progress=progress,
        ),
    )
    runner = None
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        runner, port = await runtime.serve_probes(
            manager, [controller.metrics.registry], args.bind, args.port
        )
        logging.getLogger("trainops").info(
            "controller serving /metrics, /healthz, /readyz on %s:%s", args.bind, port
        )
        if controller.progress is not None:
            # Before the first reconcile: every pod is created with the progress env.
            await controller.progress.start()
        manager.start()
        await stopping.wait()
    finally:
        await manager.stop()
        if controller.progress is not None:
            await controller.progress.stop()
        if runner is not None:
            await runner.cleanup()
        await client.close()
    return 0
