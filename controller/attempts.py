"""A replica's attempts: each ended run of its main container, its exit and where its log is.

Why: a restart must not lose the failed run's log. Where the kubelet restarts a container in
its pod (OnFailure/Always, `controller.restarts`), the previous run stays readable as
`kubectl logs <pod> --previous` until the next restart; where the controller recreates the
pod (ExitCode, a pod that ended, a pod stopped because the backoff limit is used up) the pod
and its logs are gone. So the controller keeps the tail of every ended run it is about to
lose, and of every run the kubelet restarted (before the next restart pushes it out), in one
ConfigMap per job, owned by it (`<job>-attempts`, key `<type>-<index>.<attempt>.log`).

Bounds: a kept log is the last `tail_bytes(replicas)` bytes of the run's output (16 KiB, less
when the job has many replicas: `KEPT_PER_REPLICA` logs per replica fit in `LOG_BUDGET`,
768 KiB, under the API server's 1 MiB per object), cut at a line start; the shell asks the
API server for at most `TAIL_LINES` lines and `FETCH_LIMIT` bytes. Each replica keeps its
newest `KEPT_PER_REPLICA` logs: keeping one more removes the oldest key in the same patch.
The status lists a replica's newest `MAX_ATTEMPTS` runs.

Numbering: attempt n is the replica's run after n restarts (its restart count when it ran):
a pod created with annotation A whose main container shows `restartCount` k runs attempt
A + k; the run in `lastState.terminated` is A + k - 1 while the container runs or has ended
for good, and A + k while it waits to be restarted (a waiting container's `lastState` is its
latest run, as the kubelet reports it).

Status (`tasks[].replicas[].attempts[]`, oldest first, one entry per ended run): `attempt`,
`exitCode`, `reason`, `startedAt`, `finishedAt`, `podUID` (the pod that ran it), and `keptLog`
once the controller kept its tail — `{configMap, key}` (`kubectl get cm <configMap> -o
jsonpath='{.data.<key>}'`, dots in the key escaped with a backslash). A run without `keptLog` is the
pod's latest (`kubectl logs <pod>`); the run before it is also `kubectl logs <pod> --previous`
while that pod lives (the whole log, where `keptLog` has its tail). Every field is set once
from what the pod showed, so the status does not change when the pod goes away. A kept log may
be missing from the ConfigMap when the API server could not give it (the pod was gone
already): the controller does not retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.restarts import annotated_count
from policies.schema import MAX_ATTEMPTS

__all__ = [
    "FETCH_LIMIT",
    "KEPT_PER_REPLICA",
    "LOG_BUDGET",
    "MAX_ATTEMPTS",
    "TAIL_LINES",
    "LogKeep",
    "attempts",
    "config_map_name",
    "ended_runs",
    "keep",
    "keep_run",
    "log_key",
    "tail",
    "tail_bytes",
]

KEPT_PER_REPLICA = 5
LOG_BUDGET = 768 * 1024
TAIL_MAX = 16 * 1024
TAIL_MIN = 1024
TAIL_LINES = 1000
FETCH_LIMIT = 256 * 1024


@dataclass(frozen=True)
class LogKeep:
    """Keep the tail of one run's log: read it from the pod, store it under `key`."""

    pod: str
    container: str
    previous: bool  # the run is the one `--previous` reads
    config_map: str
    key: str
    max_bytes: int
    drop: tuple[str, ...] = ()  # older keys of the replica to remove in the same write


def config_map_name(job_name: str) -> str:
    return f"{job_name}-attempts"


def log_key(job_name: str, replica: str, attempt: int) -> str:
    """`worker-0.2.log` for attempt 2 of `<job>-worker-0`."""
    short = replica[len(job_name) + 1 :] if replica.startswith(job_name + "-") else replica
    return f"{short}.{attempt}.log"


def tail_bytes(replicas: int) -> int:
    share = LOG_BUDGET // max(1, replicas * KEPT_PER_REPLICA)
    return max(TAIL_MIN, min(TAIL_MAX, share))


def tail(data: bytes, max_bytes: int) -> str:
    """The last `max_bytes` of `data`, from a line start when one is in reach, as text."""
    if len(data) > max_bytes:
        data = data[-max_bytes:]
        newline = data.find(b"\n")
        if 0 <= newline < len(data) - 1:
            data = data[newline + 1 :]
    return data.decode("utf-8", "replace")


def _main(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(cs, dict) and cs.get("name") == container:
            return cs
    return {}


def ended_runs(pod: dict[str, Any], container: str) -> list[tuple[int, dict[str, Any], bool]]:
    """`(attempt, terminated, previous)` of the runs the pod's main container still shows."""
    cs = _main(pod, container)
    base = annotated_count(pod)
    raw = cs.get("restartCount")
    count = raw if isinstance(raw, int) else 0
    state = cs.get("state") or {}
    out: list[tuple[int, dict[str, Any], bool]] = []
    last = (cs.get("lastState") or {}).get("terminated")
    if isinstance(last, dict):
        n = base + count if "waiting" in state else base + count - 1
        out.append((n, last, True))
    current = state.get("terminated")
    if isinstance(current, dict):
        out.append((base + count, current, False))
    return [r for r in out if r[0] >= 0]


def _entry(attempt: int, term: dict[str, Any], uid: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"attempt": attempt}
    for key in ("exitCode", "reason", "startedAt", "finishedAt"):
        if term.get(key) is not None:
            entry[key] = term[key]
    if isinstance(uid, str) and uid:
        entry["podUID"] = uid
    return entry


def attempts(
    old: list[dict[str, Any]] | None,
    pod: dict[str, Any] | None,
    container: str,
    kept: dict[int, dict[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The replica's next `attempts`: the old ones, the runs `pod` shows, `kept` logs added.

    `kept`: attempt → `{configMap, key}` kept in this round; `{}` as the value removes a kept
    log (its key is dropped)."""
    by_n: dict[int, dict[str, Any]] = {}
    for e in old or []:
        if isinstance(e, dict) and isinstance(e.get("attempt"), int):
            by_n[e["attempt"]] = dict(e)
    if pod is not None:
        uid = (pod.get("metadata") or {}).get("uid")
        for n, term, _ in ended_runs(pod, container):
            by_n[n] = {**by_n.get(n, {}), **_entry(n, term, uid)}
    for n, where in (kept or {}).items():
        entry = by_n.setdefault(n, {"attempt": n})
        if where:
            entry["keptLog"] = dict(where)
        else:
            entry.pop("keptLog", None)
    return [by_n[n] for n in sorted(by_n)][-MAX_ATTEMPTS:]


def keep(
    job_name: str,
    replicas: int,
    old: list[dict[str, Any]] | None,
    pod_name: str,
    container: str,
    attempt: int,
    previous: bool,
) -> tuple[LogKeep, dict[int, dict[str, str]]]:
    """The keep of `attempt`'s log and the `kept` changes for `attempts` (older keys dropped)."""
    cm = config_map_name(job_name)
    key = log_key(job_name, pod_name, attempt)
    older = sorted(
        e["attempt"]
        for e in old or []
        if isinstance(e, dict)
        and isinstance(e.get("attempt"), int)
        and e["attempt"] != attempt
        and isinstance(e.get("keptLog"), dict)
    )
    dropped = older[: max(0, len(older) - (KEPT_PER_REPLICA - 1))]
    changes: dict[int, dict[str, str]] = {n: {} for n in dropped}
    changes[attempt] = {"configMap": cm, "key": key}
    action = LogKeep(
        pod=pod_name,
        container=container,
        previous=previous,
        config_map=cm,
        key=key,
        max_bytes=tail_bytes(replicas),
        drop=tuple(log_key(job_name, pod_name, n) for n in dropped),
    )
    return action, changes


def keep_run(
    job_name: str,
    replicas: int,
    old: list[dict[str, Any]],
    pod: dict[str, Any] | None,
    container: str,
    latest: bool,
) -> tuple[LogKeep, dict[int, dict[str, str]]] | None:
    """The keep of the pod's latest ended run (`latest`: the pod is being deleted), else of
    the run `--previous` reads unless `old` shows it kept; None when there is no such run."""
    if pod is None:
        return None
    runs = ended_runs(pod, container)
    if not latest:
        runs = [run for run in runs if run[2]]
    if not runs:
        return None
    n, _, previous = runs[-1]
    if not latest and any(
        isinstance(e, dict) and e.get("attempt") == n and e.get("keptLog") for e in old
    ):
        return None
    name = str((pod.get("metadata") or {}).get("name", ""))
    return keep(job_name, replicas, old, name, container, n, previous)
