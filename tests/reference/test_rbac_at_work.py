"""The webhook and the controller at work with their own ServiceAccounts' tokens (issue #12).

Against the reference cluster (`TRAINOPS_TEST_KUBECONFIG`; skipped otherwise, see conftest)
with `deploy/` applied, each runs as a subprocess with a kubeconfig holding only its token:

- `trainops webhook --manage-certs`, as the webhook's account, fills its Secret and injects the
  CA bundle into both webhook configurations — and the API server, trusting that bundle, calls
  it for every job the tests create; `trainops certs inject` as that account succeeds too;
- `trainops controller`, as the controller's account, takes its Lease, runs a job to Succeeded
  (the test plays the kubelet as admin: there is no node), creates and deletes its TensorBoard,
  records events and releases the Lease on SIGTERM, with not one refusal in its log;
- where OwnerReferencesPermissionEnforcement is on, the controller's finalizers rule is what
  lets it set `blockOwnerDeletion` on its children.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kube import errors, resources
from kube.client import Client
from tests.reference.conftest import (
    CONTROLLER,
    NAMESPACE,
    WEBHOOK,
    WEBHOOK_SECRET,
    Identity,
    service_account_kubeconfig,
)
from tests.support.cluster import Cluster, aeventually, eventually
from tests.support.fakekubelet import set_pod_status
from tests.support.jobs import replica, tf_job
from tests.support.processes import Process, refusals, start_trainops

ROOT = Path(__file__).resolve().parents[2]
SECRET = WEBHOOK_SECRET


# -- the webhook's account at work ---------------------------------------------------------------


def test_the_webhook_account_keeps_its_secret_and_injects_the_ca_bundle(
    reference: Cluster, webhook: tuple[Process, int], webhook_identity: Identity, credentials: Path
) -> None:
    process, port = webhook

    def secret_filled() -> dict[str, str]:
        out = reference.kubectl("get", "secret", SECRET, "-n", NAMESPACE, "-o", "json")
        data: dict[str, str] = json.loads(out.stdout).get("data") or {}
        assert {"ca.crt", "ca.key", "ca-bundle.crt", "tls.crt", "tls.key"} <= set(data), data
        return data

    data = eventually(secret_filled, timeout=30)
    bundle = data["ca-bundle.crt"]
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):

        def injected(kind: str = kind) -> bool:
            out = reference.kubectl("get", kind, WEBHOOK, "-o", "json")
            hooks = json.loads(out.stdout)["webhooks"]
            return all(h["clientConfig"].get("caBundle") == bundle for h in hooks)

        eventually(injected, timeout=30)

    # The injected bundle is what a client (the API server) trusts the webhook's certificate by,
    # under the name the API server dials for the Service.
    context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=f"{WEBHOOK}.{NAMESPACE}.svc") as tls,
    ):
        assert tls.getpeercert()

    # `trainops certs inject` as the same account: nothing left to do, and allowed to look.
    ca_file = credentials / "ca-bundle.crt"
    ca_file.write_bytes(base64.b64decode(bundle))
    inject = subprocess.run(
        [
            sys.executable, "-m", "trainops", "certs", "inject",
            f"--kubeconfig={webhook_identity.kubeconfig}", f"--ca-file={ca_file}",
        ],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    assert f"MutatingWebhookConfiguration {WEBHOOK}: already up to date" in inject.stdout
    assert f"ValidatingWebhookConfiguration {WEBHOOK}: already up to date" in inject.stdout
    assert not refusals(inject.stdout + inject.stderr)
    assert process.popen.poll() is None, process.text()
    assert not refusals(process.text()), process.text()


# -- the controller's account at work ------------------------------------------------------------


async def test_the_controller_account_runs_a_job_from_start_to_finish(
    reference: Cluster,
    admitting: Process,
    controller_identity: Identity,
    jobs_namespace: str,
    credentials: Path,
) -> None:
    controller = start_trainops(
        credentials / "controller.log",
        "controller",
        f"--kubeconfig={controller_identity.kubeconfig}",
        "--bind=127.0.0.1",
        "--port=0",
        "--leader-elect",
        f"--lease-namespace={NAMESPACE}",
        "--resync-seconds=30",
    )
    admin = await Client.connect(str(reference.kubeconfig))
    try:
        try:
            await _run_a_job(admin, jobs_namespace)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- controller log:\n{controller.text()}") from exc
        lease = await admin.get(resources.LEASES, CONTROLLER, NAMESPACE)
        assert lease["spec"]["holderIdentity"], lease
        assert controller.stop() == 0, controller.text()
        # Released on SIGTERM (get + update of its own Lease), so a standby takes over at once.
        lease = await admin.get(resources.LEASES, CONTROLLER, NAMESPACE)
        assert not lease["spec"].get("holderIdentity"), lease
    finally:
        controller.stop()
        await admin.close()
    log = controller.text()
    assert "controller serving /metrics" in log, log
    # Jobs of other tests' namespaces being deleted meanwhile are refused by the API server
    # ("…because it is being terminated"): not a right the controller lacks.
    assert not [r for r in refusals(log) if "being terminated" not in r], log
    assert not refusals(admitting.text()), admitting.text()


async def _run_a_job(admin: Client, namespace: str) -> None:
    tf = resources.TFJOBS
    job = tf_job(replica("chief"), replica("worker", 1), name="mnist")
    job["metadata"]["namespace"] = namespace
    job["spec"]["tensorboardSpec"] = {
        "image": "t9kpublic/tensorboard:2.11.0",
        "trainingLogFilesets": ["t9k://pvc/logs/run"],
    }
    created = await admin.create(tf, job)
    # Defaulted by the mutating webhook: the API server called it, trusting the injected CA.
    assert created["spec"]["runPolicy"]["cleanUpPolicy"], created["spec"]

    async def children(resource: Any, names: set[str]) -> bool:
        body = await admin.list(resource, namespace)
        live = {
            o["metadata"]["name"]
            for o in body["items"]
            if not o["metadata"].get("deletionTimestamp")
        }
        if resource is resources.PODS:  # the TensorBoard's pod comes from its ReplicaSet
            live = {name for name in live if not name.startswith("mnist-tensorboard-")}
        return live == names

    replicas = {"mnist-chief-0", "mnist-worker-0"}
    await aeventually(lambda: children(resources.PODS, replicas), timeout=30)
    await aeventually(
        lambda: children(resources.SERVICES, replicas | {"mnist-tensorboard"}), timeout=30
    )
    await aeventually(lambda: children(resources.DEPLOYMENTS, {"mnist-tensorboard"}), timeout=30)
    for name in sorted(replicas):
        await set_pod_status(admin, namespace, name, "Running")
    await _wait_phase(admin, namespace, "Running")

    # Removing the TensorBoard makes the controller delete its Deployment and Service.
    await admin.patch(tf, "mnist", {"spec": {"tensorboardSpec": None}}, namespace)
    await aeventually(lambda: children(resources.DEPLOYMENTS, set()), timeout=30)
    await aeventually(lambda: children(resources.SERVICES, replicas), timeout=30)

    for name in sorted(replicas):
        await set_pod_status(admin, namespace, name, "Succeeded", 0)
    done = await _wait_phase(admin, namespace, "Succeeded")
    assert done["completionTime"]

    async def recorded() -> bool:
        body = await admin.list(resources.EVENTS, namespace)
        reasons = {
            e["reason"]
            for e in body["items"]
            if e["involvedObject"].get("name") == "mnist"
            and e.get("reportingComponent") == "trainops-controller"
        }
        return "SuccessfulCreate" in reasons

    await aeventually(recorded, timeout=30)


async def _wait_phase(admin: Client, namespace: str, phase: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | bool:
        try:
            job = await admin.get(resources.TFJOBS, "mnist", namespace)
        except errors.NotFound:
            return False
        status: dict[str, Any] = job.get("status") or {}
        return status if status.get("phase") == phase else False

    found: dict[str, Any] = await aeventually(check, timeout=30)
    return found


def test_setting_block_owner_deletion_is_what_the_finalizers_rule_is_for(
    reference: Cluster,
    admitting: Process,
    controller_identity: Identity,
    jobs_namespace: str,
    credentials: Path,
) -> None:
    """The controller's children carry `blockOwnerDeletion: true`; where the
    OwnerReferencesPermissionEnforcement admission plugin is on, only who may update the job's
    finalizers may set it. An account that may create pods but not that is refused; the
    controller's is not. Skipped where the plugin is off (kube-apiserver's default)."""
    ns = jobs_namespace
    job = tf_job(replica("worker", 1), name="owner")
    job["metadata"]["namespace"] = ns
    owner = json.loads(
        reference.kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(job)).stdout
    )
    reference.kubectl("create", "serviceaccount", "pod-creator", "-n", ns)
    reference.kubectl(
        "create", "role", "pod-creator", "--verb=create,delete", "--resource=pods", "-n", ns
    )
    reference.kubectl(
        "create", "rolebinding", "pod-creator", "--role=pod-creator",
        f"--serviceaccount={ns}:pod-creator", "-n", ns,
    )  # fmt: skip
    creator = service_account_kubeconfig(
        reference, ns, "pod-creator", credentials / "pod-creator.kubeconfig"
    )

    def pod(name: str) -> str:
        owner_ref = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_ref]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        return json.dumps(body)

    def create(identity: Identity, name: str) -> subprocess.CompletedProcess[str]:
        kubectl = ["kubectl", f"--kubeconfig={identity.kubeconfig}"]
        return subprocess.run(
            [*kubectl, "create", "--validate=false", "-f", "-"],
            input=pod(name),
            capture_output=True,
            text=True,
            timeout=60,
        )

    refused = create(creator, "not-the-controllers")
    if refused.returncode == 0:
        reference.kubectl("delete", "pod", "not-the-controllers", "-n", ns, "--wait=false")
        pytest.skip(
            "OwnerReferencesPermissionEnforcement is off on this API server: nothing checks "
            "blockOwnerDeletion (the controller's finalizers rule matters where it is on)"
        )
    assert (
        'pods "not-the-controllers" is forbidden: cannot set blockOwnerDeletion if an '
        "ownerReference refers to a resource you can't set finalizers on"
    ) in refused.stderr, refused.stderr
    allowed = create(controller_identity, "the-controllers")
    assert allowed.returncode == 0, allowed.stderr
