"""The wiring every long-running command shares: one `kube.Manager` per process (its caches,
leases and supervised loops), its leader-election flags, and `/metrics`, `/healthz`, `/readyz`.

`trainops controller` and `trainops up` build their Manager here (and `trainops gitops` the same
way): components are added to it, then it is started once, so a kind read by two components is
cached and watched once.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web
    from prometheus_client import CollectorRegistry

    from kube.client import Client
    from kube.manager import Manager

__all__ = [
    "add_client_arguments",
    "add_leader_arguments",
    "new_manager",
    "serve_probes",
]


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """`--kube-api-qps` / `--kube-api-burst`: the API client's client-side rate limit."""
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=0.0,
        metavar="QPS",
        help="at most QPS requests a second to the API server on average, as client-go's "
        "client-side limit (default 0: no limit; the server's own priority and fairness still "
        "applies)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=0,
        metavar="N",
        help="requests allowed at once above --kube-api-qps after a quiet spell (default: twice "
        "the QPS)",
    )


def add_leader_arguments(parser: argparse.ArgumentParser) -> None:
    """`--leader-elect` / `--no-leader-elect` and `--lease-namespace`."""
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one active replica through a coordination.k8s.io Lease (default: on)",
    )
    parser.add_argument(
        "--lease-namespace", default="kube-system", help="namespace of the Lease (kube-system)"
    )


def new_manager(
    client: Client,
    *,
    leader_elect: bool = True,
    lease_namespace: str = "kube-system",
    identity: str | None = None,
) -> Manager:
    """The process's one Manager (lease timings: controller-runtime's defaults), with the
    garbage-collection loop of `kube.gcfreeze`."""
    import logging

    from kube.gcfreeze import GcFreeze
    from kube.manager import LeaderElection, Manager

    return Manager(
        client,
        leader_election=LeaderElection(
            enabled=leader_elect, namespace=lease_namespace, identity=identity
        ),
        logger=logging.getLogger("trainops.manager"),
        gc_freeze=GcFreeze(),  # no multi-second full collections on the loop (kube.gcfreeze)
    )


async def serve_probes(
    manager: Manager, registries: Iterable[CollectorRegistry], bind: str, port: int
) -> tuple[web.AppRunner, int]:
    """`/metrics` (the Manager's cache metrics and `registries`), `/healthz` and `/readyz`
    (`manager.problems()`) on `bind:port` (0: a free port). Returns the runner and the port."""
    from kube import probes

    app = probes.create_app([manager.metrics, *registries], manager.problems)
    return await probes.serve(app, bind, port)
