"""`trainops apiserver`: run the embedded Kubernetes-compatible API server until interrupted."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trainops.commands.up import lock_data_dir, secure_data_dir
from trainops.commands.up_args import port_number


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg,unused-ignore]
    parser = subparsers.add_parser(
        "apiserver",
        help="run the embedded Kubernetes-compatible API server",
        description=(
            "Serve a single-machine Kubernetes API over HTTPS on loopback. State, certificates, "
            "the token and DIR/kubeconfig live in --data-dir and are reused on restart."
        ),
    )
    parser.add_argument(
        "--data-dir",
        required=True,
        type=Path,
        metavar="DIR",
        help="where the store, certificates, token and kubeconfig live (locked while serving)",
    )
    parser.add_argument(
        "--port",
        type=port_number(allow_zero=True),
        default=0,
        help="default: the port used last time, else a free one",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from trainops.commands import local

    absent = local.missing("trainops apiserver")
    if absent is not None:
        print(absent, file=sys.stderr)
        return 1
    from localcluster import datadir
    from localcluster.apiserver import ApiServerConfig, start_apiserver

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    async def serve() -> None:
        server = await start_apiserver(
            ApiServerConfig(data_dir=data_dir, host=args.host, port=args.port)
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

    data_dir = args.data_dir.expanduser().resolve()
    if data_dir.exists() and not data_dir.is_dir():
        print(f"trainops apiserver: --data-dir {data_dir} is not a directory", file=sys.stderr)
        return 2
    os.umask(0o077)  # what it writes (state, token, keys, kubeconfig) is its user's alone
    secure_data_dir(data_dir)  # before anything else touches it, so the log names all
    try:
        datadir.make_private_dir(data_dir)
        lock = lock_data_dir(data_dir, "apiserver")
    except OSError as e:
        print(f"trainops apiserver: cannot use {data_dir}: {e.strerror}", file=sys.stderr)
        return 2
    if isinstance(lock, str):
        print(f"trainops apiserver: {lock}", file=sys.stderr)
        return 1
    try:
        asyncio.run(serve())
    except OSError as e:
        print(f"trainops apiserver: {e.strerror or e}", file=sys.stderr)
        return 1
    except ValueError as e:  # e.g. a --host no certificate can name
        print(f"trainops apiserver: --host {args.host}: {e}", file=sys.stderr)
        return 2
    finally:
        lock.close()
    return 0
