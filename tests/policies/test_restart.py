"""Restart policies: which exit codes restart a replica under each policy (seeds, 重启机制)."""

from __future__ import annotations

import pytest

from policies.restart import RESTART_POLICIES, restarts

# name -> (policy, exit code, restarted?)
CASES = {
    "Never keeps a failed replica down": ("Never", 1, False),
    "Never keeps a killed replica down": ("Never", 137, False),
    "OnFailure restarts a failure": ("OnFailure", 1, True),
    "OnFailure leaves a success alone": ("OnFailure", 0, False),
    "Always restarts even a success": ("Always", 0, True),
    "Always restarts a failure": ("Always", 2, True),
    "ExitCode restarts after Control-C (130)": ("ExitCode", 130, True),
    "ExitCode restarts after SIGKILL (137)": ("ExitCode", 137, True),
    "ExitCode restarts on the user's retry code (138)": ("ExitCode", 138, True),
    "ExitCode restarts after SIGTERM (143)": ("ExitCode", 143, True),
    "ExitCode gives up on a general error (1)": ("ExitCode", 1, False),
    "ExitCode gives up on command not found (127)": ("ExitCode", 127, False),
    "ExitCode gives up on a segfault (139)": ("ExitCode", 139, False),
    "ExitCode gives up on an undefined code (42)": ("ExitCode", 42, False),
    "ExitCode leaves a success alone": ("ExitCode", 0, False),
}


@pytest.mark.parametrize(("policy", "code", "expected"), list(CASES.values()), ids=list(CASES))
def test_restart_policy_decides_by_exit_code(policy: str, code: int, expected: bool) -> None:
    assert restarts(policy, code) is expected


def test_every_supported_policy_has_a_meaning() -> None:
    for policy in RESTART_POLICIES:
        restarts(policy, 1)


def test_an_unsupported_policy_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown restart policy 'Sometimes'"):
        restarts("Sometimes", 1)
