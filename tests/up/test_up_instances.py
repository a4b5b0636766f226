"""Several `trainops up --kubeconfig` on one cluster, and beside `deploy/`'s install.

Each data directory is an instance with its own names on the cluster (webhook configurations
`trainops-up-<id>`, node `trainops-<id>`, leader identity `trainops-up-<id>@host`), labelled
with its id; stopping removes only what it created. A controller whose Lease another install
holds is not started: `up` exits 1 naming the holder, or runs without it when told to.

On the reference cluster with `TRAINOPS_TEST_KUBECONFIG`, else on an embedded API server started
for this module (`up` on it is a client like any other).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import upcluster
from tests.support.cluster import BackgroundApiServer
from tests.up.conftest import Up, eventually, finish

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LABEL = "trainops.tensorstack.dev/up-instance"
WEBHOOK_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    external = upcluster.external_kubeconfig()
    if external is not None:
        yield external
        return
    server = BackgroundApiServer(tmp_path_factory.mktemp("target"))
    try:
        yield server.server.kubeconfig
    finally:
        server.stop()


def _kubectl(
    target: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(target), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _get(target: Path, *args: str) -> dict[str, Any] | None:
    out = _kubectl(target, "get", *args, "-o", "json")
    if out.returncode != 0 and "NotFound" in out.stderr:
        return None
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def _uids(target: Path, instance: Up) -> dict[str, str]:
    found = {}
    for kind in WEBHOOK_KINDS:
        config = _get(target, kind, instance.webhook_name)
        assert config is not None, f"{kind} {instance.webhook_name} is missing"
        assert config["metadata"]["labels"][LABEL] == instance.instance_id
        found[kind] = config["metadata"]["uid"]
    return found


def _holder(target: Path, lease: str, namespace: str = "kube-system") -> str:
    body = _get(target, "lease", "-n", namespace, lease)
    return str(((body or {}).get("spec") or {}).get("holderIdentity") or "")


def _up(target: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainops",
            "up",
            "--data-dir",
            str(data_dir),
            "--kubeconfig",
            str(target),
            "--node",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _started(target: Path, data_dir: Path, *args: str) -> Up:
    instance = Up(data_dir)
    instance.external = target
    instance.start(args=args)
    return instance


def test_two_instances_on_one_cluster_do_not_touch_each_other(target: Path, tmp_path: Path) -> None:
    upcluster.reset_namespace(target)
    first = _started(target, tmp_path / "first")
    second: Up | None = None
    try:
        # The Leases are taken just after the banner.
        for lease in ("trainops-controller", "trainops-gitops"):
            eventually(lambda lease=lease: _holder(target, lease).startswith(first.webhook_name))
        # The scheduler and Deployment controller run on one node of the cluster only.
        eventually(lambda: _holder(target, "trainops-node-controllers") == first.node_name)
        # The controllers' Leases are the first's: the second runs without them, as told.
        second = _started(target, tmp_path / "second", "--no-controller", "--no-gitops")
        assert first.instance_id != second.instance_id
        assert first.node_name != second.node_name
        first_uids = _uids(target, first)
        second_uids = _uids(target, second)
        assert set(first_uids.values()).isdisjoint(second_uids.values())
        for instance in (first, second):
            node = _get(target, "node", instance.node_name)
            assert node is not None
            assert node["metadata"]["labels"][LABEL] == instance.instance_id

        assert second.stop() == 0
        second_gone = {kind: _get(target, kind, second.webhook_name) for kind in WEBHOOK_KINDS}
        assert second_gone == dict.fromkeys(WEBHOOK_KINDS)
        assert _uids(target, first) == first_uids
        assert _holder(target, "trainops-controller").startswith(first.webhook_name + "@")
        assert _holder(target, "trainops-gitops").startswith(first.webhook_name + "@")
        assert _holder(target, "trainops-node-controllers") == first.node_name
        # The first's webhook still judges jobs.
        denied = _kubectl(
            target,
            "apply",
            "--server-side",
            "-f",
            str(EXAMPLES / "denied" / "limits-below-requests.yaml"),
        )
        assert denied.returncode != 0
        assert "denied the request" in denied.stderr, denied.stderr
    finally:
        if second is not None:
            finish(second)
        finish(first)


def test_a_second_instance_refuses_the_controller_another_one_holds(
    target: Path, tmp_path: Path
) -> None:
    upcluster.reset_namespace(target)
    first = _started(target, tmp_path / "first")
    try:
        eventually(lambda: _holder(target, "trainops-controller").startswith(first.webhook_name))
        done = _up(target, tmp_path / "second")
        assert done.returncode == 1, done.stderr
        line = done.stderr.strip().splitlines()[-1]
        assert "kube-system/trainops-controller is held by " + first.webhook_name in line
        assert "another `trainops up`" in line and "--no-controller" in line
        # Refused before anything was registered.
        second_id = (tmp_path / "second" / "instance-id").read_text().strip()
        for kind in WEBHOOK_KINDS:
            assert _get(target, kind, f"trainops-up-{second_id}") is None
    finally:
        finish(first)


DEPLOY_CONFIG = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "trainops-webhook"},  # deploy/webhook/webhooks.yaml's name
    "webhooks": [],
}


def _held_lease(name: str, holder: str, namespace: str = "kube-system") -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600, "renewTime": now},
    }


def test_deploys_objects_survive_and_its_held_lease_is_named(target: Path, tmp_path: Path) -> None:
    """deploy/'s webhook configuration is not `up`'s to replace or delete; a job controller of
    deploy/'s holding the Lease stops `up` (exit 1, naming it) unless --no-controller."""
    upcluster.reset_namespace(target)
    created = _kubectl(target, "create", "-f", "-", stdin=yaml.safe_dump(DEPLOY_CONFIG))
    assert created.returncode == 0, created.stderr
    holder = "trainops-controller-6b9f7c-x2x4z_1_0a1b2c3d"
    _kubectl(target, "create", "namespace", "trainops-system")  # deploy/'s (may exist)
    lease = _kubectl(
        target,
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        stdin=yaml.safe_dump(_held_lease("trainops-controller", holder, "trainops-system")),
    )
    assert lease.returncode == 0, lease.stderr
    try:
        uid = (_get(target, "validatingwebhookconfiguration", "trainops-webhook") or {})[
            "metadata"
        ]["uid"]
        refused = _up(target, tmp_path / "data")
        assert refused.returncode == 1, refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        # deploy/ keeps its Lease beside it (--lease-namespace $(POD_NAMESPACE)), not where
        # `up` keeps its own: `up` looks in both.
        assert f"trainops-system/trainops-controller is held by {holder}" in line
        assert "deploy/'s controller" in line and "--no-controller" in line

        instance = _started(target, tmp_path / "data", "--no-controller")
        try:
            assert "controller  none (--no-controller)" in "".join(instance.output)
            assert instance.stop() == 0
        finally:
            finish(instance)
        kept = _get(target, "validatingwebhookconfiguration", "trainops-webhook")
        assert kept is not None and kept["metadata"]["uid"] == uid
        assert _holder(target, "trainops-controller", "trainops-system") == holder
    finally:
        _kubectl(target, "delete", "validatingwebhookconfiguration", "trainops-webhook")
        _kubectl(target, "delete", "lease", "-n", "trainops-system", "trainops-controller")


def test_a_server_not_on_this_machine_needs_a_webhook_url(tmp_path: Path) -> None:
    """Decided from the kubeconfig alone: nothing is sent to the address."""
    kubeconfig = tmp_path / "remote.yaml"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://192.0.2.10:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainops",
            "up",
            "--data-dir",
            str(tmp_path / "d"),
            "--kubeconfig",
            str(kubeconfig),
            "--no-node",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "the API server https://192.0.2.10:6443" in done.stderr
    assert "cannot call the webhook on 127.0.0.1" in done.stderr
    assert "add --webhook-url https://HOST:PORT" in done.stderr


def test_the_webhook_listens_on_and_registers_the_webhook_url(target: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"https://127.0.0.1:{port}"
    upcluster.reset_namespace(target)
    instance = _started(
        target, tmp_path / "data", "--webhook-url", url, "--no-controller", "--no-gitops"
    )
    try:
        assert f"  webhook     {url}\n" in instance.output
        config = _get(target, "validatingwebhookconfiguration", instance.webhook_name)
        assert config is not None
        assert config["webhooks"][0]["clientConfig"]["url"] == f"{url}/validate"
        denied = _kubectl(
            target,
            "apply",
            "--server-side",
            "-f",
            str(EXAMPLES / "denied" / "limits-below-requests.yaml"),
        )
        assert "denied the request" in denied.stderr, denied.stderr
        assert instance.stop() == 0
    finally:
        finish(instance)


def test_a_webhook_url_that_is_not_https_host_port_is_a_usage_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "k.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    for bad in ("http://127.0.0.1:9443", "https://127.0.0.1", "https://127.0.0.1:9443/hook"):
        done = _up(kubeconfig, tmp_path / "d", "--webhook-url", bad)
        assert done.returncode == 2, done.stderr
        assert f"--webhook-url {bad}: give it as https://HOST:PORT" in done.stderr


def test_the_instance_id_is_kept_across_restarts(target: Path, tmp_path: Path) -> None:
    instance = _started(target, tmp_path / "data", "--no-controller", "--no-gitops")
    try:
        first = instance.instance_id
        assert instance.stop() == 0
        instance.start(args=("--no-controller", "--no-gitops"))
        assert instance.instance_id == first
        assert _uids(target, instance)
    finally:
        finish(instance)
