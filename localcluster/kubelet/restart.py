"""Restart decisions and crash-loop back-off, as pure functions of policy, exits and time.

The kubelet's rules (`ShouldContainerBeRestarted`, `doBackOff`):

- restartPolicy `Always` restarts every exited container, `OnFailure` only non-zero exits,
  `Never` none. Init containers that failed are retried unless the policy is `Never`, which fails
  the pod; init containers that succeeded never run again.
- Back-off per container: the first exit restarts at once and arms a 10 s back-off; each later
  exit waits the current back-off, then doubles it up to 300 s. An entry whose last update is
  more than twice the maximum (10 min) older than the new exit is forgotten, so a container that
  ran well for ten minutes starts over at 10 s.
"""

from __future__ import annotations

from datetime import datetime

from localcluster.kubelet.model import BackOff, BackOffPolicy

__all__ = [
    "backoff_after_restart",
    "go_duration",
    "restart_delay",
    "should_restart",
    "should_restart_init",
]


def should_restart(restart_policy: str, exit_code: int) -> bool:
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True  # Always (the default)


def should_restart_init(restart_policy: str, exit_code: int) -> bool:
    """An init container is rerun only after a failure, and never under `Never`."""
    return exit_code != 0 and restart_policy != "Never"


def _expired(entry: BackOff, finished_at: datetime, policy: BackOffPolicy) -> bool:
    return (finished_at - entry.last_update).total_seconds() > 2 * policy.maximum


def restart_delay(entry: BackOff | None, finished_at: datetime, policy: BackOffPolicy) -> float:
    """Seconds after `finished_at` before the container may start again."""
    if entry is None or _expired(entry, finished_at, policy):
        return 0.0
    return entry.period


def backoff_after_restart(
    entry: BackOff | None, finished_at: datetime, policy: BackOffPolicy
) -> BackOff:
    """The entry once the container is restarted after the exit at `finished_at`."""
    if entry is None or _expired(entry, finished_at, policy):
        return BackOff(policy.initial, finished_at)
    return BackOff(min(entry.period * 2, policy.maximum), finished_at)


def go_duration(seconds: float) -> str:
    """Format like Go's `time.Duration.String()` (`10s`, `1m20s`, `5m0s`, `200ms`)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{sec_text}"
    if minutes:
        return f"{int(minutes)}m{sec_text}"
    return sec_text
