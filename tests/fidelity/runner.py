"""Running workflows: the real kubectl against one server (a kubeconfig), in a fresh namespace.

Both servers get the same namespace name, so outputs differ only by what the servers do. The
CRDs of trainops (`trainops crds`) are installed once per server, server-side, before any
workflow. Every kubectl call has a timeout; waiting is deadline-bound polling.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.fidelity.model import Outcome, Step, Workflow
from tests.fidelity.normalize import normalize, sort_causes

__all__ = ["Target", "install_crds", "namespace_for", "run_pair", "run_workflow"]

KUBECTL = shutil.which("kubectl") or "kubectl"
CALL_TIMEOUT = 90.0
UNTIL_DEADLINE = 45.0
_UID_REF = re.compile(r"\$UID\{([^}]+)\}")


@dataclass
class Target:
    """One server: a name for reports and the kubeconfig that reaches it."""

    name: str
    kubeconfig: Path
    cache_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fid-kube-")))

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.cache_dir),
        }
        try:
            return subprocess.run(
                [KUBECTL, *args],
                input=stdin,
                env=env,
                capture_output=True,
                text=True,
                timeout=CALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(e.cmd, -9, "", f"timed out after {CALL_TIMEOUT}s")


def namespace_for(workflow: Workflow) -> str:
    return f"fid-{workflow.name}"[:50] + "-" + uuid.uuid4().hex[:6]


def install_crds(target: Target, crds_yaml: str) -> None:
    """Install (server-side apply) the CRDs and wait until every one is Established."""
    out = target.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=crds_yaml)
    if out.returncode != 0:
        raise RuntimeError(f"{target.name}: installing the CRDs failed: {out.stderr}")
    names = re.findall(r"customresourcedefinition\.apiextensions\.k8s\.io/(\S+)", out.stdout)
    for name in names:
        waited = target.kubectl(
            "wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s"
        )
        if waited.returncode != 0:
            raise RuntimeError(f"{target.name}: CRD {name} not established: {waited.stderr}")


def run_workflow(target: Target, workflow: Workflow, namespace: str) -> list[Outcome]:
    """Run every step in a fresh `namespace` (deleted afterwards, without waiting)."""
    created = target.kubectl("create", "namespace", namespace)
    if created.returncode != 0:
        raise RuntimeError(f"{target.name}: creating namespace {namespace}: {created.stderr}")
    try:
        _wait_for_default_service_account(target, namespace)
        return [_run_step(target, step, namespace) for step in workflow.steps]
    finally:
        target.kubectl("delete", "namespace", namespace, "--wait=false")


def run_pair(
    reference: Target, embedded: Target, workflow: Workflow
) -> tuple[list[Outcome], list[Outcome]]:
    """The workflow on both servers at once (same namespace name)."""
    namespace = namespace_for(workflow)
    with ThreadPoolExecutor(max_workers=2) as pool:
        ref = pool.submit(run_workflow, reference, workflow, namespace)
        emb = pool.submit(run_workflow, embedded, workflow, namespace)
        return ref.result(), emb.result()


def _run_step(target: Target, step: Step, namespace: str) -> Outcome:
    args = [_fill(a, target, namespace) for a in step.args]
    stdin = None if step.stdin is None else _fill(step.stdin, target, namespace)
    deadline = time.monotonic() + UNTIL_DEADLINE
    while True:
        out = target.kubectl("--namespace", namespace, *args, stdin=stdin)
        if step.until is None or step.until in out.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    stdout, stderr = normalize(out.stdout, namespace), normalize(out.stderr, namespace)
    if step.unordered:
        stdout, stderr = sort_causes(stdout), sort_causes(stderr)
    return Outcome(out.returncode, stdout, stderr)


def _fill(text: str, target: Target, namespace: str) -> str:
    text = text.replace("$NS", namespace)

    def uid(match: re.Match[str]) -> str:
        got = target.kubectl(
            "--namespace", namespace, "get", match.group(1), "-o", "jsonpath={.metadata.uid}"
        )
        return got.stdout.strip() or "missing-uid"

    return _UID_REF.sub(uid, text)


def _wait_for_default_service_account(target: Target, namespace: str) -> None:
    """Pods are refused until the namespace's `default` ServiceAccount exists (a controller
    creates it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if target.kubectl("--namespace", namespace, "get", "sa", "default").returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{target.name}: no default ServiceAccount in {namespace} within 30s")
