"""One local node: the kubelet with its scheduler and Deployment controller, started together.

`start_node(kubeconfig, data_dir)` is what `trainops up` and test fixtures call; everything talks
to the API server through the kubeconfig only, so the same node can serve any API server.

The kubelet's log endpoint accepts only clients with a certificate from `client_ca`; by default
that is the CA of the kubeconfig's cluster, as on a kubeadm cluster where one CA signs the API
server's serving certificate and its kubelet client certificate (the embedded server and
`hack/reference-cluster` do the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from localcluster.client.kube import Kube, connect
from localcluster.controllers.deployments import DeploymentController
from localcluster.controllers.scheduler import Scheduler
from localcluster.kubelet.kubelet import Kubelet, KubeletConfig
from localcluster.kubelet.model import BackOffPolicy

__all__ = ["NodeStartError", "RunningNode", "start_node"]


class NodeStartError(RuntimeError):
    """The node cannot start; the message says what to pass instead (one line)."""


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
    client_ca: bytes | None = None,
    node_labels: Mapping[str, str] | None = None,
    backoff: BackOffPolicy | None = None,
    shutdown_grace_seconds: float = 10.0,
) -> RunningNode:
    """Join `node_name`; `client_ca` (PEM) is the CA the log endpoint trusts for clients
    (default: the kubeconfig's cluster CA)."""
    kube = await connect(kubeconfig)
    if client_ca is None:
        ca_file = kube.ca_file
        try:
            client_ca = Path(ca_file).read_bytes() if ca_file else None
        except OSError:
            client_ca = None
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
