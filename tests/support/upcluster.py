"""`trainops up` on a real cluster in tests: the arguments, and a clean `default` namespace.

With `TRAINOPS_TEST_KUBECONFIG` set, the `up` fixtures (`tests/up/conftest.py`) start
`trainops up --kubeconfig $TRAINOPS_TEST_KUBECONFIG --node` (with the tenancy flags its local,
ServiceAccount-less test repositories need) instead of the embedded API server.
A real cluster outlives each `up`, unlike the fresh embedded server of a fresh data directory,
so what one test left in `default` (jobs, pods bound to the node of an `up` that has stopped,
Events) is deleted before the next `up` starts: the tests keep their fixed names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["external_kubeconfig", "reset_namespace", "up_args"]

# What the `up` tests create, in deletion order (owners first).
_KINDS = (
    "tensorflowtrainingjobs.batch.tensorstack.dev",
    "xgboosttrainingjobs.batch.tensorstack.dev",
    "jobrepositories.gitops.trainops.dev",
    "deployments",
    "replicasets",
)


def external_kubeconfig() -> Path | None:
    """The real cluster the suite runs against, if any."""
    value = os.environ.get("TRAINOPS_TEST_KUBECONFIG")
    return Path(value) if value else None


def up_args(kubeconfig: Path | None) -> tuple[str, ...]:
    """`trainops up`'s arguments for the cluster: none for the embedded server."""
    if kubeconfig is None:
        return ()
    # The tests' repositories are local (file://) and name no ServiceAccount: on a real
    # cluster `up` refuses both unless told (docs/GITOPS.md, "Trust and tenancy").
    return (
        *("--kubeconfig", str(kubeconfig), "--node"),
        *("--allow-local-repos", "--allow-reconciler-identity"),
    )


def reset_namespace(kubeconfig: Path, namespace: str = "default") -> None:
    """Delete what tests leave in `namespace`: training jobs and JobRepositories, Deployments,
    pods (at once: the node that ran them has stopped), Services but `kubernetes`, Events."""
    kubectl = shutil.which("kubectl") or "kubectl"

    def run(*args: str) -> None:
        out = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "-n", namespace, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        # Before the first `up`, the CRDs may not be installed yet: nothing to delete.
        missing = "doesn't have a resource type" in out.stderr
        assert out.returncode == 0 or missing, f"kubectl {' '.join(args)}: {out.stderr}"

    for kind in _KINDS:
        run("delete", kind, "--all", "--ignore-not-found", "--wait=true", "--timeout=60s")
    run("delete", "pods", "--all", "--grace-period=0", "--force", "--ignore-not-found")
    run("delete", "services", "-l", "provider!=kubernetes", "--ignore-not-found")
    run("delete", "events", "--all", "--ignore-not-found")
