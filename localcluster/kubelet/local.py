"""One local node: the kubelet with its scheduler and Deployment controller, started together.

`start_node(kubeconfig, data_dir)` is what `trainops up` and test fixtures call; everything talks
to the API server through the kubeconfig only, so the same node can serve any API server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localcluster.client.kube import Kube, connect
from localcluster.controllers.deployments import DeploymentController
from localcluster.controllers.scheduler import Scheduler
from localcluster.kubelet.images import ImageEnv
from localcluster.kubelet.kubelet import Kubelet, KubeletConfig
from localcluster.kubelet.model import BackOffPolicy

__all__ = ["RunningNode", "start_node"]


@dataclass
class RunningNode:
    kube: Kube
    kubelet: Kubelet
    scheduler: Scheduler
    deployments: DeploymentController

    @property
    def node_name(self) -> str:
        return self.kubelet.config.node_name

    @property
    def log_port(self) -> int:
        return self.kubelet.logs.port

    async def stop(self) -> None:
        """Stop the controllers, then the kubelet (which ends every pod process)."""
        await self.deployments.stop()
        await self.scheduler.stop()
        await self.kubelet.stop()
        await self.kube.close()


async def start_node(
    kubeconfig: Path,
    data_dir: Path,
    *,
    node_name: str = "trainops",
    backoff: BackOffPolicy | None = None,
    shutdown_grace_seconds: float = 10.0,
    pod_network: bool = True,
    images: tuple[ImageEnv, ...] = (),
) -> RunningNode:
    kube = await connect(kubeconfig)
    config = KubeletConfig(
        data_dir=data_dir,
        node_name=node_name,
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
    scheduler.start()
    deployments = DeploymentController(kube)
    deployments.start()
    return RunningNode(kube, kubelet, scheduler, deployments)
