"""Container lifecycle: the `preStop` handler and `activeDeadlineSeconds`.

`deadline_left` is pure (pass `now`); `run_pre_stop` runs one handler (`exec`, `httpGet`,
`sleep`) with the probe machinery, bounded by the grace period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from localcluster.kubelet import probes
from localcluster.kubelet.logs import parse_time

__all__ = ["DEADLINE_MESSAGE", "deadline_left", "run_pre_stop"]

DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def deadline_left(
    spec: Mapping[str, Any], status: Mapping[str, Any], now: datetime
) -> float | None:
    """Seconds until `activeDeadlineSeconds` (counted from `startTime`) runs out; None when the
    pod has no deadline, has not started, or has finished."""
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is None or not status.get("startTime"):
        return None
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    return float(deadline) - (now - parse_time(status["startTime"])).total_seconds()


async def run_pre_stop(
    handler: Mapping[str, Any],
    *,
    container: Mapping[str, Any],
    env: Mapping[str, str],
    cwd: str,
    grace: float,
    host: str = "127.0.0.1",
    enter: Sequence[str] = (),
) -> tuple[bool, str]:
    if "sleep" in handler:
        await asyncio.sleep(min(float((handler["sleep"] or {}).get("seconds") or 0), grace))
        return True, ""
    return await probes.run_probe(
        {**handler, "timeoutSeconds": grace},
        container=container,
        env=env,
        static_env={},
        cwd=cwd,
        host=host,
        enter=enter,
    )
