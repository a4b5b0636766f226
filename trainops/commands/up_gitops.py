"""`trainops up`'s GitOps part: the reconciler, `--repo`'s JobRepository, and the HTTP API.

Wiring only, split from `up.py` to keep each module to one screenful of concerns: the
reconciler (`gitops.runtime.manager.GitOpsReconciler`, always running: users may create JobRepository
objects with kubectl), the JobRepository `up --repo` keeps applied, its log lines, and the HTTP
API (`gitops.api.routes`) on 127.0.0.1 with `/metrics` of the controller, the reconciler and their shared caches beside it.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitops.engine.redact import RedactingFormatter, redact

if TYPE_CHECKING:
    from kube.client import Client
    from kube.manager import Manager

__all__ = [
    "add_tenancy_arguments",
    "boundaries",
    "choose_repository",
    "dns_name",
    "gitops_logging",
    "repo_problem",
    "repository_candidates",
    "repository_name",
    "same_source",
    "secret_ref",
    "source_key",
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
    handler.setFormatter(RedactingFormatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.propagate = False


def repository_name(url: str) -> str:
    """A DNS-1123 name for `up --repo URL`'s JobRepository: the repository's base name
    (`https://host/org/Train-Jobs.git` → `train-jobs`), `repo` when nothing usable is left."""
    import re

    base = url.split("#", 1)[0].split("?", 1)[0]  # never a query's `?private_token=…`
    base = base.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    base = base.removesuffix(".git").lower()
    name = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:63].strip("-")
    return name or "repo"


_UP_TENANCY = (
    "What each JobRepository may reach. Embedded (no --kubeconfig): one user, so "
    "repositories act as the reconciler and may use local repositories; with "
    "--kubeconfig each acts as its spec.serviceAccountName."
)


def add_tenancy_arguments(parser: argparse.ArgumentParser, description: str = _UP_TENANCY) -> None:
    """The reconciler's tenancy flags (`gitops.engine.tenancy.Boundaries`; docs/GITOPS.md, "Trust
    and tenancy"): each widens one boundary of what a JobRepository may reach."""
    group = parser.add_argument_group("GitOps tenancy", description)
    group.add_argument(
        "--default-service-account",
        metavar="NAME",
        help="the ServiceAccount (in its own namespace) a JobRepository without "
        "spec.serviceAccountName acts as",
    )
    group.add_argument(
        "--allow-reconciler-identity",
        action="store_true",
        default=None,
        help="a JobRepository naming no ServiceAccount (and no --default-service-account) "
        "acts as the reconciler itself, with all its rights (the default when embedded)",
    )
    group.add_argument(
        "--allow-local-repos",
        action="store_true",
        default=None,
        help="allow file:// URLs and local paths in repoURL (the default when embedded)",
    )
    group.add_argument(
        "--allow-cross-namespace",
        action="store_true",
        help="allow namespaced objects outside the JobRepository's own namespace",
    )
    group.add_argument(
        "--allow-cluster-resources",
        metavar="KIND,...",
        type=_kinds,
        default=frozenset(),
        help="allow these cluster-scoped kinds (Namespace, ClusterRole, "
        "CustomResourceDefinition.apiextensions.k8s.io, …; * for all)",
    )


def boundaries(args: argparse.Namespace, *, embedded: bool | None = None) -> Any:
    """The `gitops.engine.tenancy.Boundaries` of the tenancy flags: embedded `up` (one user, no RBAC)
    acts as itself and allows local repositories; `up --kubeconfig` and `trainops gitops`
    (`embedded=False`) only when told."""
    from gitops.engine.tenancy import Boundaries

    if embedded is None:
        embedded = getattr(args, "kubeconfig", None) is None

    def flag(name: str) -> bool:
        value = getattr(args, name, None)
        return embedded if value is None else bool(value)

    return Boundaries(
        default_service_account=getattr(args, "default_service_account", None),
        allow_reconciler_identity=flag("allow_reconciler_identity"),
        allow_local_repos=flag("allow_local_repos"),
        allow_cross_namespace=bool(getattr(args, "allow_cross_namespace", False)),
        allow_cluster_resources=frozenset(getattr(args, "allow_cluster_resources", ())),
    )


def repo_problem(args: argparse.Namespace) -> str | None:
    """Why the reconciler would refuse `--repo`'s JobRepository (`up --kubeconfig` without the
    flag it needs), so `up` can say so before anything starts; None when it would not."""
    from gitops.engine import tenancy

    url = getattr(args, "repo", None)
    if not url:
        return None
    rules = boundaries(args)
    problem = tenancy.check_source(url, rules)
    if problem is None:
        try:
            tenancy.identity_for({"metadata": {"namespace": "default"}}, rules)
        except tenancy.Refused:
            problem = (
                "it would name no ServiceAccount to act as: pass --default-service-account "
                "NAME (a ServiceAccount of namespace default), or --allow-reconciler-identity "
                "to act as this process"
            )
    return f"--repo {url}: {problem}" if problem is not None else None


def _kinds(text: str) -> frozenset[str]:
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    if not kinds:
        raise argparse.ArgumentTypeError("name at least one kind, e.g. Namespace")
    return kinds


def source_key(url: str, path: str | None) -> tuple[str, str]:
    """What makes two `--repo` runs the same repository: the URL (without a trailing `/`)
    and the path (`.` when unset; `./jobs/` is `jobs`)."""
    import posixpath

    clean = posixpath.normpath((path or ".").strip() or ".").lstrip("/") or "."
    return url.strip().rstrip("/"), clean


def repository_candidates(url: str, path: str | None) -> list[str]:
    """`up --repo`'s names, in order: the base name while it is free or already ours, then the
    base name with a short hash of the URL and path (`jobs-3f9a1c`), so each distinct source
    gets its own JobRepository."""
    import hashlib

    base = repository_name(url)
    source = "\n".join(source_key(url, path))
    digest = hashlib.sha256(source.encode()).hexdigest()[:6]
    return [base, f"{base[:56].rstrip('-')}-{digest}"]


def same_source(existing: dict[str, Any], url: str, path: str | None) -> bool:
    """Whether the JobRepository `existing` follows `url` at `path`."""
    spec = existing.get("spec") if isinstance(existing.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    have = source_key(str(spec.get("repoURL") or ""), spec.get("path"))
    return have == source_key(url, path)


async def choose_repository(
    client: Client, url: str, path: str | None, explicit: str | None
) -> str:
    """The JobRepository `default/<name>` for `--repo url --path path`: `--repo-name` when
    given, else the first candidate that is free or follows this source already. Never one
    following another source (RuntimeError: one line saying which name to use)."""
    from gitops.runtime.reconciler import JOB_REPOSITORIES
    from kube import errors

    names = [explicit] if explicit else repository_candidates(url, path)
    taken: list[str] = []
    for name in names:
        try:
            existing = await client.get(JOB_REPOSITORIES, name, "default")
        except errors.NotFound:
            return name
        if same_source(existing, url, path):
            return name
        spec = existing.get("spec") or {}
        have_url, have_path = source_key(str(spec.get("repoURL") or ""), spec.get("path"))
        where = have_url + (f" path {have_path}" if have_path != "." else "")
        taken.append(f"default/{name} follows {where}")
    flag = "--repo-name" if explicit else "--repo"
    raise RuntimeError(
        f"{flag}: {'; '.join(taken)}; it is not repointed at {url}: choose another "
        "--repo-name, or delete it first (trainops repo delete NAME)"
    )


async def start_gitops(
    stack: Any,
    manager: Manager,
    data_dir: Path,
    args: argparse.Namespace,
    *,
    reconcile: bool = True,
    secret: bytes | None = None,
) -> None:
    """The GitOps component `trainops gitops` runs (`gitops_service.component`: the reconciler
    on `manager`, always — users may create JobRepository objects with kubectl —, and the API,
    push hook and dashboard `start_api` serves; it runs once the caller starts the manager), and
    with --repo the JobRepository `default/<name>` it keeps applied (`choose_repository`: one per
    URL and path, never repointed). Without `reconcile` (`--no-gitops`) it only watches, for the
    dashboard: another install syncs."""
    from gitops.runtime.manager import GitOpsSettings
    from gitops.runtime.reconciler import JOB_REPOSITORIES
    from trainops.commands import gitops_limits, gitops_service

    client = manager.client
    rules = boundaries(args)
    built = gitops_service.component(
        manager,
        data_dir / "git",
        GitOpsSettings(reconcile=reconcile, boundaries=rules, limits=gitops_limits.limits(args)),
        webhook_secret=secret,
        allow_remote_writes=False,  # loopback only: up is one user's
        registries=stack.metrics_registries,  # the controller's, read at each scrape
    )
    gitops = built.reconciler
    stack.gitops = gitops
    stack.gitops_app = built.app
    if not reconcile:
        stack.notes.append("gitops      not syncing (--no-gitops): another install syncs")
    if not getattr(args, "repo", None):
        if reconcile:
            stack.notes.append(
                "gitops      watching JobRepository objects (kubectl get jobrepo -A)"
            )
        return
    name = await choose_repository(client, args.repo, args.path, getattr(args, "repo_name", None))
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
    what = redact(args.repo) + (f" path {args.path}" if args.path else "")
    what += f" at {args.revision}" if args.revision else ""
    stack.notes.append(f"gitops      default/{name} syncing {what} (kubectl get jobrepo)")


async def start_api(stack: Any, client: Client, args: argparse.Namespace, data_dir: Path) -> None:
    """The GitOps component's application (`start_gitops`) on 127.0.0.1 (`--dashboard-port`,
    else a free port), its address and token in `DATA_DIR/api.json` for `trainops repo`; its
    `/metrics` has the controller's and GitOps' metrics, `/healthz` and `/readyz` GitOps' state.

    Every request but the push hook and `/metrics` needs a bearer token the API server
    accepts (TokenReview) and is authorized as its user (SubjectAccessReview). Embedded, that
    is `DATA_DIR/api-token` (the embedded server knows it; the banner's login link carries it);
    with --kubeconfig, the CLI uses the kubeconfig's own token when it has one."""
    from gitops.api import routes as api

    app = stack.gitops_app
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
    token = getattr(stack, "api_token", None) or client.bearer_token
    api.write_address(data_dir, url, token)
    if getattr(stack, "api_token", None):
        stack.login_url = f"{url}/?token={stack.api_token}"

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


def dns_name(text: str) -> str:
    """An argparse type for `--repo-name`: a DNS-1123 label (what a JobRepository's name may
    be), so a bad name is a usage error before anything starts."""
    import re

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: lower-case letters, digits and '-', starting and ending with a letter "
            "or digit, at most 63 characters"
        )
    return text


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
