"""`trainops up`'s GitOps part: the reconciler, `--repo`'s JobRepository, and the HTTP API.

Wiring only, split from `up.py` to keep each module to one screenful of concerns: the
reconciler (`gitops.manager.GitOpsReconciler`, always running: users may create JobRepository
objects with kubectl), the JobRepository `up --repo` keeps applied, its log lines, and the HTTP
API (`gitops.api`) on 127.0.0.1 with `/metrics` of the controller and the reconciler beside it.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kube.client import Client

__all__ = [
    "gitops_logging",
    "repository_name",
    "secret_ref",
    "start_api",
    "start_gitops",
    "webhook_secret",
]

GITOPS_LOGGER = "trainops.gitops"
UP_REPO_INTERVAL = "10s"
"""`up`'s repository is polled often: one local user, and a push should show up quickly."""

log = logging.getLogger(__name__)


def gitops_logging(verbose: bool) -> None:
    """Syncs, denials and admissions at INFO, one human line each (`gitops default/jobs:
    synced abc1234 (3 applied, 1 denied: jobs/bad.yaml:12: …)`), even without --verbose."""
    logger = logging.getLogger(GITOPS_LOGGER)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    if verbose:
        return  # the root handler prints it, with the other debug output
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.propagate = False


def repository_name(url: str) -> str:
    """A DNS-1123 name for `up --repo URL`'s JobRepository: the repository's base name
    (`https://host/org/Train-Jobs.git` → `train-jobs`), `repo` when nothing usable is left."""
    import re

    base = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    base = base.removesuffix(".git").lower()
    name = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:63].strip("-")
    return name or "repo"


async def start_gitops(
    stack: Any, client: Client, data_dir: Path, args: argparse.Namespace
) -> None:
    """The GitOps reconciler (always: users may create JobRepository objects with kubectl),
    and with --repo the JobRepository `default/<name>` it keeps applied."""
    import socket

    from gitops.manager import GitOpsReconciler, GitOpsSettings
    from gitops.reconciler import JOB_REPOSITORIES

    gitops = GitOpsReconciler(
        client,
        data_dir / "git",
        GitOpsSettings(identity=f"trainops-up@{socket.gethostname()}"),
    )
    gitops.start()
    stack.stops.append(gitops.stop)
    stack.gitops = gitops
    stack.metrics_registries.append(gitops.metrics.registry)
    if not getattr(args, "repo", None):
        stack.notes.append("gitops      watching JobRepository objects (kubectl get jobrepo -A)")
        return
    name = repository_name(args.repo)
    spec: dict[str, Any] = {
        "repoURL": args.repo,
        "interval": UP_REPO_INTERVAL,
        "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
    }
    if args.path:
        spec["path"] = args.path
    if args.revision:
        spec["targetRevision"] = args.revision
    body = {
        "apiVersion": JOB_REPOSITORIES.api_version,
        "kind": JOB_REPOSITORIES.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    # Server-side apply as `trainops-up`: fields a user set with kubectl stay theirs, and
    # dropping --path on the next run removes it.
    await client.patch(
        JOB_REPOSITORIES, name, body, "default", patch_type="apply",
        field_manager="trainops-up", force=True,
    )  # fmt: skip
    what = args.repo + (f" path {args.path}" if args.path else "")
    what += f" at {args.revision}" if args.revision else ""
    stack.notes.append(f"gitops      default/{name} syncing {what} (kubectl get jobrepo)")


async def start_api(
    stack: Any, client: Client, args: argparse.Namespace, data_dir: Path, secret: bytes | None
) -> None:
    """The HTTP API on 127.0.0.1 (`--dashboard-port`, else a free port), its address in
    `DATA_DIR/api.json` for `trainops repo`, and `/metrics` for the controller and GitOps.

    On loopback, writes need no token (the issue's rule: a token when listening beyond it);
    cross-site browser requests are refused by the API itself."""
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST
    from prometheus_client.exposition import generate_latest

    import dashboard
    from gitops import api

    app = api.create_app(stack.gitops, token=None, webhook_secret=secret, allow_remote_writes=False)
    dashboard.install(app, hub=stack.gitops, client=client)
    registries = [r for r in stack.metrics_registries if r is not None]

    async def metrics(_: web.Request) -> web.Response:
        body = b"".join(generate_latest(r) for r in registries)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/metrics", metrics)
    remembered = data_dir / DASHBOARD_PORT_FILE
    try:
        if args.dashboard_port:
            runner, port = await api.serve(app, "127.0.0.1", args.dashboard_port)
        else:
            runner, port = await _serve_on_the_last_port(api, app, remembered)
    except OSError as e:
        if e.errno == errno.EADDRINUSE and args.dashboard_port:
            raise RuntimeError(
                f"--dashboard-port {args.dashboard_port}: the port is in use by another "
                "program; choose another, or leave --dashboard-port out to pick a free one"
            ) from None
        raise
    remembered.write_text(f"{port}\n")
    url = api.base_url("127.0.0.1", port)
    api.write_address(data_dir, url, None)

    async def stop() -> None:
        api.remove_address(data_dir)
        await runner.cleanup()

    stack.stops.append(stop)
    stack.api_url = url
    stack.notes.append(f"API         {url}/api/v1/repositories, /api/v1/jobs, /metrics")


DASHBOARD_PORT_FILE = "dashboard.port"
"""The API's port, kept across restarts so the dashboard's address (and bookmarks) stays."""


async def _serve_on_the_last_port(api: Any, app: Any, remembered: Path) -> tuple[Any, int]:
    """Serve on the port the last `up` on this data directory used, else on a free one."""
    try:
        last = int(remembered.read_text().strip())
    except (OSError, ValueError):
        last = 0
    if 0 < last < 65536:
        try:
            return await api.serve(app, "127.0.0.1", last)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            log.warning("the dashboard's last port %d is in use; it moves to a free one", last)
    return await api.serve(app, "127.0.0.1", 0)


def secret_ref(text: str) -> str:
    """An argparse type for `--git-webhook-secret NAMESPACE/NAME`: the form is a usage error
    before anything starts (the Secret itself is read once the API server is up)."""
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r}: name the Secret as NAMESPACE/NAME")
    return text


async def webhook_secret(client: Client, ref: str | None) -> bytes | None:
    """The `secret` key of the Secret `NAMESPACE/NAME` (`--git-webhook-secret`), read by `up`
    right after connecting: a missing Secret stops it before anything else has started."""
    import base64

    from kube import errors, resources

    if not ref:
        return None
    namespace, _, name = ref.rpartition("/")
    flag = f"--git-webhook-secret {ref}"
    if not namespace or not name:
        raise RuntimeError(f"{flag}: name the Secret as NAMESPACE/NAME")
    try:
        secret = await client.get(resources.SECRETS, name, namespace)
    except errors.NotFound:
        raise RuntimeError(
            f"{flag}: no such Secret; create it with `kubectl create secret generic {name} "
            f"-n {namespace} --from-literal=secret=…`"
        ) from None
    value = (secret.get("data") or {}).get("secret")
    if not value:
        raise RuntimeError(f"{flag}: the Secret has no key `secret`")
    return base64.b64decode(value)
