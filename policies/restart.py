"""What each replica `restartPolicy` means for a container that exited with a given code.

Why it lives with the rules: the enum is validated here, and the controller must give the
four values exactly the meaning the seeds document, so the meaning is a pure, tested function
next to the enum rather than a branch buried in a reconciler.

Semantics (T9k seeds, "重启机制"; Kubeflow tf-operator README for the exit-code classes):

- `Never`: a replica that exits is not restarted (keeps its logs for debugging).
- `OnFailure`: restarted when it exits with a non-zero code.
- `Always`: restarted whenever it exits, even with 0.
- `ExitCode`: restarted only for exit codes that signal an environmental, retryable cause:
  130 (128+SIGINT, Control-C), 137 (128+SIGKILL), 143 (128+SIGTERM) and 138, reserved for the
  user to request a restart. Every other non-zero code (1, 2, 126, 127, 128, 139 and codes the
  seeds leave undefined) is permanent: restarting code that fails the same way wastes the
  cluster's resources. 0 is success.

Restarts also count against `runPolicy.backoffLimit`; that budget is the controller's.
"""

from __future__ import annotations

from policies.rules_common import RESTART_POLICIES

__all__ = ["RESTART_POLICIES", "RETRYABLE_EXIT_CODES", "restarts"]

RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})


def restarts(policy: str, exit_code: int) -> bool:
    """Whether a replica whose container exited with `exit_code` is restarted under `policy`.

    Raises `ValueError` for a policy outside `RESTART_POLICIES`: validation rejects those, so
    one reaching here is a bug, not user input.
    """
    if policy == "Never":
        return False
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    if policy == "ExitCode":
        return exit_code in RETRYABLE_EXIT_CODES
    raise ValueError(f"unknown restart policy {policy!r}; expected one of {RESTART_POLICIES}")
