"""Container probes (startup, readiness, liveness): thresholds (pure) and running one probe.

Kubernetes semantics: a probe's result flips to success after `successThreshold` consecutive
successes and to failure after `failureThreshold` consecutive failures (defaults 1 and 3). Before
its first verdict, readiness counts as not ready, liveness as alive, startup as not started;
readiness and liveness wait until the startup probe succeeded. A failed liveness or startup
probe kills the container, which then restarts per the pod's restart policy.

Handlers: `exec` (the command, run in the container's environment and directory, exit 0 =
success), `httpGet` (host defaults to the pod IP; 200–399 = success; HTTPS without
certificate verification, as the kubelet does), `tcpSocket` (a connection = success). `grpc` is
not supported and counts as success (documented). Ports may be numbers or container port names.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from localcluster.kubelet.expansion import expand

__all__ = ["ProbeState", "ProbeTiming", "observe", "run_probe", "timing"]


@dataclass(frozen=True)
class ProbeTiming:
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int


def timing(probe: Mapping[str, Any]) -> ProbeTiming:
    return ProbeTiming(
        initial_delay=float(probe.get("initialDelaySeconds") or 0),
        period=float(probe.get("periodSeconds") or 10),
        timeout=float(probe.get("timeoutSeconds") or 1),
        success_threshold=int(probe.get("successThreshold") or 1),
        failure_threshold=int(probe.get("failureThreshold") or 3),
    )


@dataclass(frozen=True)
class ProbeState:
    ok: bool  # the current verdict
    successes: int = 0  # consecutive
    failures: int = 0  # consecutive


def observe(state: ProbeState, success: bool, t: ProbeTiming) -> ProbeState:
    """The verdict after one more probe result."""
    if success:
        n = state.successes + 1
        return ProbeState(state.ok or n >= t.success_threshold, n, 0)
    n = state.failures + 1
    return ProbeState(state.ok and n < t.failure_threshold, 0, n)


async def run_probe(
    probe: Mapping[str, Any],
    *,
    container: Mapping[str, Any],
    env: Mapping[str, str],
    static_env: Mapping[str, str],
    cwd: str,
    host: str = "127.0.0.1",
    enter: Sequence[str] = (),
) -> tuple[bool, str]:
    """Run one probe; (success, message for the `Unhealthy` event). `host` is the pod's IP
    (the default of httpGet and tcpSocket); `enter` prefixes an exec command so that it runs in
    the pod's namespaces."""
    t = timing(probe)
    try:
        async with asyncio.timeout(t.timeout):
            if "exec" in probe:
                return await _exec(probe["exec"] or {}, env, static_env, cwd, enter)
            if "httpGet" in probe:
                return await _http(probe["httpGet"] or {}, container, host)
            if "tcpSocket" in probe:
                return await _tcp(probe["tcpSocket"] or {}, container, host)
    except TimeoutError:
        return False, f"timeout: probe did not answer within {t.timeout:g}s"
    return True, ""  # grpc and unknown handlers: not run


def _port(value: Any, container: Mapping[str, Any]) -> int:
    if isinstance(value, int):
        return value
    if str(value).isdigit():
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    raise ValueError(f"port {value!r} is not a number or a container port name")


async def _exec(
    spec: Mapping[str, Any],
    env: Mapping[str, str],
    static_env: Mapping[str, str],
    cwd: str,
    enter: Sequence[str],
) -> tuple[bool, str]:
    command = [expand(str(c), static_env.get) for c in spec.get("command") or []]
    if not command:
        return False, "exec probe has no command"
    command = [*enter, *command]
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=dict(env),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as e:
        return False, f"exec {command[0]!r}: {e.strerror}"
    try:
        out, _ = await proc.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    text = out.decode(errors="replace").strip()
    return proc.returncode == 0, text or f"command exited with {proc.returncode}"


async def _http(
    spec: Mapping[str, Any], container: Mapping[str, Any], pod_ip: str
) -> tuple[bool, str]:
    try:
        port = _port(spec.get("port"), container)
    except ValueError as e:
        return False, str(e)
    scheme = str(spec.get("scheme") or "HTTP").lower()
    host = spec.get("host") or pod_ip
    path = str(spec.get("path") or "/")
    url = f"{scheme}://{host}:{port}{path if path.startswith('/') else '/' + path}"
    headers = {h["name"]: h.get("value", "") for h in spec.get("httpHeaders") or [] if "name" in h}
    headers.setdefault("User-Agent", "kube-probe/1.32")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, headers=headers, ssl=ctx, allow_redirects=False) as resp,
        ):
            if 200 <= resp.status < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {resp.status}"
    except aiohttp.ClientError as e:
        return False, f'Get "{url}": {e}'


async def _tcp(
    spec: Mapping[str, Any], container: Mapping[str, Any], pod_ip: str
) -> tuple[bool, str]:
    try:
        port = _port(spec.get("port"), container)
    except ValueError as e:
        return False, str(e)
    host = spec.get("host") or pod_ip
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        return False, f"dial tcp {host}:{port}: {e.strerror or e}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""
