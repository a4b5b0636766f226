"""Fixtures for the image tier: the trainops image (built by hack/image) run with podman and runc.

Every test here skips, with the reason, where the image cannot be run: no podman or runc, podman
unable to start a container (an unprivileged sandbox, say), or no image built yet (`hack/image`;
`hack/image-tests` builds it and runs this tier against the reference control plane). Containers
run as deploy/ runs them: user 65532, read-only root filesystem, a small /tmp, no capabilities,
host network (so an API server on loopback can call a webhook in the container).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.manifests import REPO, documents

IMAGE = os.environ.get("TRAINOPS_TEST_IMAGE", "localhost/trainops:latest")
HACK_IMAGE = REPO / "hack" / "image"
CRDS = REPO / "deploy" / "crds"
# As deploy/ runs the containers (the Deployments' securityContext), in podman's words.
RESTRICTED = (
    "--user=65532:65532",
    "--read-only",
    "--read-only-tmpfs=false",
    "--tmpfs=/tmp:rw,size=16m",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
)


@dataclass
class Podman:
    """podman with runc and hack/image's containers.conf (crun cannot run here: docs/IMAGE.md)."""

    podman: str
    runc: str
    conf: Path
    started: list[str] = field(default_factory=list)

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [self.podman, *args],
            env={**os.environ, "CONTAINERS_CONF": str(self.conf)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert out.returncode == 0, f"podman {' '.join(args)}: {out.stderr}"
        return out

    def run(
        self, *args: str, volumes: tuple[str, ...] = (), entrypoint: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the image to completion (`args` after the image name) as deploy/ runs it."""
        options = [f"--volume={v}" for v in volumes]
        if entrypoint is not None:
            options.append(f"--entrypoint={entrypoint}")
        return self(
            "run", "--rm", f"--runtime={self.runc}", "--network=host", *RESTRICTED,
            *options, IMAGE, *args, check=False,
        )  # fmt: skip

    def start(self, *args: str, volumes: tuple[str, ...] = ()) -> str:
        """Start the image in the background; returns the container's name. The fixture removes
        whatever is still there at the end."""
        name = f"trainops-test-{uuid.uuid4().hex[:8]}"
        self.started.append(name)
        options = [f"--volume={v}" for v in volumes]
        self(
            "run", "--detach", f"--name={name}", f"--runtime={self.runc}", "--network=host",
            *RESTRICTED, *options, IMAGE, *args,
        )  # fmt: skip
        return name


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    binary = shutil.which("podman")
    if binary is None:
        pytest.skip("podman is not installed (apt-get install -y podman buildah runc uidmap)")
    runc = shutil.which("runc") or "/usr/sbin/runc"
    if not os.access(runc, os.X_OK):
        pytest.skip("runc is not installed (apt-get install -y runc)")
    conf = subprocess.run(
        [str(HACK_IMAGE), "conf"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    tool = Podman(binary, runc, Path(conf))
    if tool("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.skip(f"no {IMAGE} in podman's image store: build it with hack/image")
    built_from = tool(
        "image", "inspect", "--format", '{{index .Labels "dev.trainops.tree"}}', IMAGE
    ).stdout.strip()
    tree = subprocess.run(
        [str(HACK_IMAGE), "tree-id"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    if built_from != tree:
        pytest.skip(
            f"{IMAGE} was built from another tree ({built_from or 'unlabelled'}, this one is "
            f"{tree}): hack/image rebuilds it (hack/image-tests builds, then runs this tier)"
        )
    probe = tool.run(entrypoint="/bin/true")
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"podman cannot run a container here: {reason}")
    try:
        yield tool
    finally:
        for name in tool.started:
            tool("rm", "--force", "--time=5", "--ignore", name, check=False)


@pytest.fixture(scope="module")
def training_crds(cluster: Cluster) -> None:
    for path in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "-f", str(path))
        cluster.wait_established(documents(path)[0]["metadata"]["name"])
