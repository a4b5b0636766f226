"""One local node: the kubelet with its scheduler and Deployment controller, started together.

`start_node(kubeconfig, data_dir)` is what `trainops up` and test fixtures call; everything talks
to the API server through the kubeconfig only, so the same node can serve any API server.

The kubelet's log endpoint accepts only clients with a certificate from `client_ca`; by default
that is the CA of the kubeconfig's cluster, as on a kubeadm cluster where one CA signs the API
server's serving certificate and its kubelet client certificate (the embedded server and
`hack/reference-cluster` do the same).

The scheduler and the Deployment controller act on the whole cluster, so of several nodes
joined to one (two `trainops up --kubeconfig`) only the holder of the Lease
`kube-system/trainops-node-controllers` runs them: two would bind the same pods and create each
Deployment's pods twice. A node that does not hold it still runs the pods bound to it; it takes
over when the holder stops (released at once) or dies (after the Lease's 15 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kube.leader import LeaderElector, LeaderLost
from localcluster.client.kube import Kube, connect
from localcluster.controllers.deployments import DeploymentController
from localcluster.controllers.scheduler import Scheduler
from localcluster.kubelet.images import ImageEnv
from localcluster.kubelet.kubelet import Kubelet, KubeletConfig
from localcluster.kubelet.model import BackOffPolicy

__all__ = ["NodeStartError", "RunningNode", "start_node"]


log = logging.getLogger("trainops.kubelet")

NODE_CONTROLLERS_LEASE = ("kube-system", "trainops-node-controllers")


class NodeStartError(RuntimeError):
    """The node cannot start; the message says what to pass instead (one line)."""


@dataclass
class RunningNode:
    kube: Kube
    kubelet: Kubelet
    scheduler: Scheduler
    deployments: DeploymentController
    leader: asyncio.Task[None]
    """Runs the scheduler and the Deployment controller while this node holds their Lease."""

    @property
    def node_name(self) -> str:
        return self.kubelet.config.node_name

    @property
    def log_port(self) -> int:
        return self.kubelet.logs.port

    async def stop(self) -> None:
        """Stop the controllers (releasing their Lease), then the kubelet (which ends every pod
        process)."""
        self.leader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.leader
        await self.deployments.stop()
        await self.scheduler.stop()
        await self.kubelet.stop()
        await self.kube.close()


async def start_node(
    kubeconfig: Path,
    data_dir: Path,
    *,
    node_name: str = "trainops",
    client_ca: bytes | None = None,
    node_labels: Mapping[str, str] | None = None,
    backoff: BackOffPolicy | None = None,
    shutdown_grace_seconds: float = 10.0,
    pod_network: bool = True,
    images: tuple[ImageEnv, ...] = (),
) -> RunningNode:
    """Join `node_name`; `client_ca` (PEM) is the CA the log endpoint trusts for clients
    (default: the kubeconfig's cluster CA)."""
    kube = await connect(kubeconfig)
    if client_ca is None:
        client_ca = kube.ca_pem
    if not client_ca:
        await kube.close()
        raise NodeStartError(
            f"{kubeconfig} names no certificate authority for its cluster, so the kubelet "
            "cannot tell which client certificate is the API server's: pass "
            "--kubelet-client-ca FILE (the CA that signed the API server's "
            "--kubelet-client-certificate)"
        )
    config = KubeletConfig(
        data_dir=data_dir,
        client_ca=client_ca,
        node_name=node_name,
        node_labels=dict(node_labels or {}),
        backoff=backoff or BackOffPolicy(),
        shutdown_grace_seconds=shutdown_grace_seconds,
        pod_network=pod_network,
        images=images,
    )
    kubelet = Kubelet(kube, config)
    try:
        await kubelet.start()
    except BaseException:
        await kube.close()
        raise
    scheduler = Scheduler(kube, node_name)
    deployments = DeploymentController(kube)
    leader = asyncio.create_task(
        _lead_controllers(kube, node_name, scheduler, deployments), name="node-controllers"
    )
    return RunningNode(kube, kubelet, scheduler, deployments, leader)


async def _lead_controllers(
    kube: Kube, node_name: str, scheduler: Scheduler, deployments: DeploymentController
) -> None:
    """The scheduler and the Deployment controller, while holding their Lease (identity: the
    node's name, so a restarted node holds it again at once); standing by otherwise."""
    namespace, name = NODE_CONTROLLERS_LEASE
    elector = LeaderElector(kube.client, namespace=namespace, name=name, identity=node_name)

    async def work() -> None:
        scheduler.start()
        deployments.start()
        try:
            await asyncio.Event().wait()
        finally:
            await deployments.stop()
            await scheduler.stop()

    while True:
        try:
            await elector.run(work)
        except LeaderLost as e:
            log.warning("scheduler and Deployment controller stopped: %s", e)
