"""The progress endpoint (HTTPS, in the controller process) and what it feeds.

- `POST /v1/progress/{namespace}/{plural}/{name}` with `Authorization: Bearer <token>`: a
  training process reports (docs/PROGRESS.md). The token is the job's (`progress.token_for`:
  HMAC of its uid under the key in the Secret `controller/progress_keys.py` keeps), so a pod
  of one job cannot write another's progress. Answers: 202 accepted; 400 not JSON; 401 no or
  a wrong token (also for a job that does not exist: no oracle of job names); 404 not a job
  kind; 413 a body over `MAX_BODY_BYTES`; 422 the fields that are wrong; 429 over the job's
  rate (`rate` a second, `burst` at once, all its replicas together); 503 this replica does
  not lead (only the leader writes status: try again, `Retry-After: 1`).
- `pod_env(job, body)`: the reconciler's hook on each replica pod it creates — the env
  `TRAINOPS_PROGRESS_URL`, `_TOKEN`, `_CA` (PEM), `_REPLICA` on the main container (a
  variable the user set keeps the user's value).
- `with_progress(job, status, now)`: the reconciler's hook on each planned status — it adds
  `status.progress` (this process's latest summary, else the stored one): no write of its own.
  A report marks the job dirty and queues it for when `write_seconds` have passed since its
  last summary, so reports reach the status at most every `write_seconds` in the reconcile's
  own status write (batched with whatever else that write carries).
- the curves: every `history_seconds` the leader writes each changed job's history to the
  ConfigMap `trainops-progress-<job uid>` in the controller's own namespace (`progress.json`),
  reading it once first so a new leader continues the curves rather than restarting them.
  Not in the job's namespace: what is there is the tenant's (GitOps, and so the dashboard,
  may read nothing there but jobs, pods, their logs and Events); the dashboard reads the
  curves here after the user's own review of the job. An ownerReference cannot cross
  namespaces, so the leader deletes the curves of jobs that are gone (`sweep`, every minute).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from controller import labels
from controller.progress import (
    MAX_BODY_BYTES,
    Bucket,
    JobProgress,
    parse_report,
    thin,
    token_for,
    token_ok,
)
from controller.progress_keys import ProgressKeys, ensure_keys
from controller.reconciler import JOB_RESOURCES, job_key
from kube import errors, resources
from kube.client import Client
from kube.informer import Informer, wait_synced
from policies.defaults import copy_json

__all__ = ["ENV_CA", "ENV_REPLICA", "ENV_TOKEN", "ENV_URL", "ProgressService", "ProgressSettings"]

log = logging.getLogger(__name__)

ENV_URL = "TRAINOPS_PROGRESS_URL"
ENV_TOKEN = "TRAINOPS_PROGRESS_TOKEN"
ENV_CA = "TRAINOPS_PROGRESS_CA"
ENV_REPLICA = "TRAINOPS_PROGRESS_REPLICA"
HISTORY_KEY = "progress.json"
CURVES_OF = "batch.tensorstack.dev/progress-of"
"""The label on a curves ConfigMap: the uid of its job."""
CURVES_JOB = "batch.tensorstack.dev/job"
SWEEP_SECONDS = 60.0
_PLURALS = {r.plural: r for r in JOB_RESOURCES.values()}
_MAIN = {"TensorFlowTrainingJob": "tensorflow", "XGBoostTrainingJob": "xgboost"}
_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ProgressSettings:
    url: str | None = None
    """The base URL pods are given (`https://host:port`); None: `https://<bind>:<port>`, or
    127.0.0.1 when `bind` is every address."""
    bind: str = "0.0.0.0"
    port: int = 8443
    namespace: str = "kube-system"
    """The controller's own namespace: the Secret, and every job's curves."""
    secret_name: str = "trainops-controller-progress"
    freebind: bool = False
    """Bind `bind` before the address exists (Linux IP_FREEBIND): `up`'s pod-network bridge
    gets its address with the first pod, and loses it with the last."""
    write_seconds: float = 5.0
    history_seconds: float = 10.0
    rate: float = 5.0
    burst: float = 20.0


@dataclass
class _State:
    key: str
    progress: JobProgress = field(default_factory=JobProgress)
    bucket: Bucket = field(default_factory=lambda: Bucket(5.0, 20.0))
    dirty: bool = False
    scheduled: bool = False
    published: dict[str, Any] | None = None
    published_at: datetime | None = None
    curves_dirty: bool = False
    curves_loaded: bool = False
    curves_version: str | None = None


class ProgressService:
    def __init__(
        self,
        client: Client,
        jobs: dict[str, Informer],
        settings: ProgressSettings,
        *,
        enqueue: Callable[[str, float], None],
        is_leader: Callable[[], bool],
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.client = client
        self.jobs = jobs
        self.settings = settings
        self.enqueue = enqueue
        self.is_leader = is_leader
        self.clock = clock or (lambda: datetime.now(UTC))
        self.keys: ProgressKeys | None = None
        self.base_url = ""
        self.port = 0
        self._states: dict[str, _State] = {}
        self._runner: web.AppRunner | None = None

    # -- start and stop -------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind the port, read or create the Secret, serve. Before the controller creates a pod:
        every pod must get the env."""
        s = self.settings
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/progress/{namespace}/{plural}/{name}", self._report)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            host = urlsplit(s.url).hostname if s.url else _own_host(s.bind).strip("[]")
            if not host:
                raise ValueError(f"progress URL {s.url!r} names no host")
            self.keys = await ensure_keys(self.client, s.namespace, s.secret_name, host)
            site: web.BaseSite
            if s.freebind:
                sock = _freebind_socket(s.bind, s.port)
                site = web.SockSite(runner, sock, ssl_context=_context(self.keys))
            else:
                site = web.TCPSite(runner, s.bind, s.port, ssl_context=_context(self.keys))
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1]) if runner.addresses else s.port
        self.base_url = (s.url or f"https://{_own_host(s.bind)}:{self.port}").rstrip("/")
        log.info(
            "progress endpoint on %s:%s, given to pods as %s", s.bind, self.port, self.base_url
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- hooks of the reconciler ----------------------------------------------------------------
    def url_of(self, job: dict[str, Any]) -> str:
        meta = job.get("metadata") or {}
        plural = JOB_RESOURCES[str(job.get("kind"))].plural
        return f"{self.base_url}/v1/progress/{meta.get('namespace', '')}/{plural}/{meta.get('name', '')}"

    def pod_env(self, job: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """`body` (a replica pod about to be created) with the progress env on its main container."""
        if self.keys is None or job.get("kind") not in _MAIN:
            return body
        body = copy_json(body)
        meta = body.get("metadata") or {}
        pod_labels = meta.get("labels") or {}
        replica = (
            f"{pod_labels.get(labels.REPLICA_TYPE, '')}-{pod_labels.get(labels.REPLICA_INDEX, '')}"
        )
        uid = str((job.get("metadata") or {}).get("uid") or "")
        ours = {
            ENV_URL: self.url_of(job),
            ENV_TOKEN: token_for(self.keys.token_key, uid),
            ENV_CA: self.keys.ca_pem.decode(),
            ENV_REPLICA: replica,
        }
        for container in (body.get("spec") or {}).get("containers") or []:
            if isinstance(container, dict) and container.get("name") == _MAIN[str(job["kind"])]:
                env = list(container.get("env") or [])
                taken = {e.get("name") for e in env if isinstance(e, dict)}
                env += [{"name": k, "value": v} for k, v in ours.items() if k not in taken]
                container["env"] = env
        return body

    def with_progress(
        self, job: dict[str, Any], status: dict[str, Any], now: datetime
    ) -> dict[str, Any]:
        """`status` plus `progress`: the latest summary once `write_seconds` have passed since the
        last, else the one already published or stored."""
        uid = str((job.get("metadata") or {}).get("uid") or "")
        old = (job.get("status") or {}).get("progress")
        state = self._states.get(uid)
        progress = old
        if state is not None:
            state.scheduled = False
            if state.dirty and _due(state.published_at, now, self.settings.write_seconds) <= 0:
                state.published = state.progress.summary(now)
                state.published_at = now
                state.dirty = False
            elif state.dirty:
                self._schedule(state, now)
            progress = state.published or old
        if not progress:
            return status
        if status.get("phase") in _FINISHED:
            progress = {k: v for k, v in progress.items() if k not in ("eta", "etaTime")}
        return {**status, "progress": progress}

    # -- the endpoint ---------------------------------------------------------------------------
    async def _report(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        plural = request.match_info["plural"]
        name = request.match_info["name"]
        resource = _PLURALS.get(plural)
        if resource is None:
            return _error(404, f"{plural} is not a training job kind ({', '.join(_PLURALS)})")
        what = f"{plural} {namespace}/{name}"
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return _error(
                401, f"no token: send Authorization: Bearer ${'{'}TRAINOPS_PROGRESS_TOKEN{'}'}"
            )
        informer = self.jobs.get(resource.kind)
        job = informer.get(namespace, name) if informer is not None else None
        uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
        assert self.keys is not None
        if job is None or not token_ok(self.keys.token_key, uid, header[len("Bearer ") :].strip()):
            return _error(401, f"the token is not valid for {what} (or the job is gone)")
        if not self.is_leader():
            return _error(503, "this controller replica does not lead: try again", retry=1)
        state = self._states.get(uid)
        if state is None:
            key = job_key(resource.kind, namespace, name)
            state = _State(key, bucket=Bucket(self.settings.rate, self.settings.burst))
            state.progress.master = _master(job)
            self._states[uid] = state
        if not state.bucket.allow(time.monotonic()):
            return _error(
                429, f"more than {self.settings.rate:g} reports a second for {what}", retry=1
            )
        try:
            body = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"the body is over {MAX_BODY_BYTES} bytes")
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(400, f"the body is not JSON: {exc}")
        report = parse_report(body)
        if isinstance(report, list):
            return web.json_response(
                {
                    "error": "; ".join(str(e) for e in report),
                    "fields": [{"field": e.field, "message": e.message} for e in report],
                },
                status=422,
            )
        if report.replica not in _replicas(job):
            return web.json_response(
                {
                    "error": f"replica: {report.replica} is not a replica of {what}",
                    "fields": [{"field": "replica", "message": "not a replica of this job"}],
                },
                status=422,
            )
        now = self.clock()
        state.progress.record(report, now)
        state.dirty = state.curves_dirty = True
        self._schedule(state, now)
        return web.json_response({"accepted": True}, status=202)

    def _schedule(self, state: _State, now: datetime) -> None:
        if state.scheduled:
            return
        state.scheduled = True
        self.enqueue(state.key, _due(state.published_at, now, self.settings.write_seconds))

    # -- the curves -----------------------------------------------------------------------------
    async def run_history(self) -> None:
        """The leader's loop: write changed curves every `history_seconds`; forget gone jobs,
        and delete their ConfigMaps (every `SWEEP_SECONDS`)."""
        await wait_synced(list(self.jobs.values()))
        swept = -math.inf
        while True:
            await asyncio.sleep(self.settings.history_seconds)
            await self.flush_history()
            if time.monotonic() - swept >= SWEEP_SECONDS:
                swept = time.monotonic()
                await self.sweep()

    def _live(self) -> dict[str, dict[str, Any]]:
        return {
            str((j.get("metadata") or {}).get("uid") or ""): j
            for informer in self.jobs.values()
            for j in informer.list()
        }

    async def flush_history(self) -> None:
        live = self._live()
        for uid in [u for u in self._states if u not in live]:
            del self._states[uid]
        for uid, state in list(self._states.items()):
            if state.curves_dirty:
                try:
                    await self._write_curves(live[uid], state)
                except errors.APIError as exc:
                    log.warning("progress: writing the curves of %s: %s", state.key, exc)

    async def sweep(self) -> None:
        """Delete the curves of jobs that are gone (a ConfigMap in the controller's namespace
        cannot be owned by a job in another, so the garbage collector does not)."""
        namespace = self.settings.namespace
        body = await self.client.list(resources.CONFIGMAPS, namespace, label_selector=CURVES_OF)
        live = self._live()
        for cm in body.get("items") or []:
            meta = cm.get("metadata") or {}
            if (meta.get("labels") or {}).get(CURVES_OF) in live:
                continue
            try:
                await self.client.delete(
                    resources.CONFIGMAPS,
                    meta["name"],
                    namespace,
                    preconditions={"uid": str(meta["uid"])} if meta.get("uid") else None,
                )
            except (errors.NotFound, errors.Conflict):
                continue
            log.info(
                "progress: deleted %s/%s, the curves of a job that is gone", namespace, meta["name"]
            )

    async def _write_curves(self, job: dict[str, Any], state: _State) -> None:
        meta = job["metadata"]
        uid = str(meta.get("uid"))
        name, namespace = curves_name(uid), self.settings.namespace
        if not state.curves_loaded:
            try:
                stored = await self.client.get(resources.CONFIGMAPS, name, namespace)
            except errors.NotFound:
                stored = None
            if stored is not None:
                _seed(state.progress, stored)
                state.curves_version = (stored.get("metadata") or {}).get("resourceVersion")
            state.curves_loaded = True
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {CURVES_OF: uid, "app.kubernetes.io/managed-by": "trainops"},
                "annotations": {
                    CURVES_JOB: f"{job.get('kind')} {meta.get('namespace')}/{meta['name']}"
                },
            },
            "data": {HISTORY_KEY: json.dumps(state.progress.curves(), separators=(",", ":"))},
        }
        state.curves_dirty = False
        try:
            if state.curves_version is None:
                written = await self.client.create(resources.CONFIGMAPS, body, namespace)
            else:
                body["metadata"]["resourceVersion"] = state.curves_version
                written = await self.client.replace(resources.CONFIGMAPS, body, namespace)
        except (errors.Conflict, errors.NotFound):
            state.curves_loaded, state.curves_version, state.curves_dirty = False, None, True
            return
        except errors.APIError:
            state.curves_dirty = True
            raise
        state.curves_version = (written.get("metadata") or {}).get("resourceVersion")


def curves_name(uid: str) -> str:
    """The ConfigMap of a job's curves, in the controller's namespace."""
    return f"trainops-progress-{uid}"


def _freebind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        freebind = getattr(socket, "IP_FREEBIND", 15)  # Linux's value where Python lacks it
        sock.setsockopt(socket.SOL_IP, freebind, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _own_host(bind: str) -> str:
    if bind in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{bind}]" if ":" in bind else bind


def _due(published_at: datetime | None, now: datetime, interval: float) -> float:
    """Seconds until the next summary may be written (a quarter second early is on time)."""
    if published_at is None:
        return 0.0
    left = interval - (now - published_at).total_seconds()
    return 0.0 if left <= 0.25 else left


def _replicas(job: dict[str, Any]) -> set[str]:
    """`<type>-<index>` of every replica the job's spec asks for (so a report cannot grow the
    job's state with names of its own)."""
    out: set[str] = set()
    for spec in (job.get("spec") or {}).get("replicaSpecs") or []:
        if isinstance(spec, dict) and isinstance(spec.get("type"), str):
            count = spec.get("replicas")
            count = count if isinstance(count, int) else 1
            out |= {f"{spec['type'].lower()}-{i}" for i in range(min(count, 10_000))}
    return out


def _master(job: dict[str, Any]) -> str:
    types = {
        r.get("type")
        for r in (job.get("spec") or {}).get("replicaSpecs") or []
        if isinstance(r, dict)
    }
    if job.get("kind") == "XGBoostTrainingJob":
        return "master-0"
    return "chief-0" if "chief" in types else "worker-0"


def _seed(progress: JobProgress, stored: dict[str, Any]) -> None:
    """Put the stored curves before the ones reported since (a new leader continues them)."""
    try:
        doc = json.loads((stored.get("data") or {}).get(HISTORY_KEY) or "{}")
    except ValueError:
        return
    for replica, curves in (doc.get("replicas") or {}).items():
        if not isinstance(curves, dict):
            continue
        mine = progress.history.setdefault(str(replica), {})
        for metric, points in curves.items():
            if not isinstance(points, list):
                continue
            newer = mine.get(metric) or []
            first = newer[0][0] if newer else float("inf")
            older = [p for p in points if isinstance(p, list) and len(p) == 2 and p[0] < first]
            mine[str(metric)] = thin(older + newer)


def _error(status: int, message: str, *, retry: int | None = None) -> web.Response:
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return web.json_response({"error": message}, status=status, headers=headers)


def _context(keys: ProgressKeys) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # load_cert_chain reads files only: a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="trainops-progress-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(keys.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(keys.key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx
