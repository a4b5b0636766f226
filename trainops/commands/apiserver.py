"""`trainops apiserver`: run the embedded Kubernetes-compatible API server until interrupted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg,unused-ignore]
    parser = subparsers.add_parser(
        "apiserver",
        help="run the embedded Kubernetes-compatible API server",
        description=(
            "Serve a single-machine Kubernetes API over HTTPS on loopback. State, certificates, "
            "the token and DIR/kubeconfig live in --data-dir and are reused on restart."
        ),
    )
    parser.add_argument("--data-dir", required=True, type=Path, metavar="DIR")
    parser.add_argument(
        "--port", type=int, default=0, help="default: the port used last time, else a free one"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from localcluster.apiserver import ApiServerConfig, start_apiserver

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    async def serve() -> None:
        server = await start_apiserver(
            ApiServerConfig(data_dir=args.data_dir, host=args.host, port=args.port)
        )
        print(f"trainops apiserver: serving {server.url}", file=sys.stderr)
        print(f"  export KUBECONFIG={server.kubeconfig}", file=sys.stderr)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except OSError as e:
        print(f"trainops apiserver: {e}", file=sys.stderr)
        return 1
    return 0
