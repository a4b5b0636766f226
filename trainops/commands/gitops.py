"""`trainops gitops`: the GitOps reconciler, HTTP API, push hook and dashboard as a service.

Argument parsing and wiring only. What runs is `gitops_service.component` — the very component
`trainops up` runs —, served on `--bind:--port` beyond loopback (every request but the push hook
and the probes authenticated with a TokenReview, authorized with SubjectAccessReviews). Several
replicas elect one reconciling leader through the Lease `trainops-gitops`; every replica serves
the API and the dashboard from its informer caches, and a sync or refresh asked of any of them
is a write to the JobRepository that the leader carries out (`gitops.engine.triggers`).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.commands import gitops_limits, runtime, up_gitops
from trainops.commands.up_args import port_number

if TYPE_CHECKING:
    from kube.client import Client

__all__ = ["SECRET_ENV", "register", "run"]

SECRET_ENV = "TRAINOPS_GIT_WEBHOOK_SECRET"
"""The push hook's secret, when neither --git-webhook-secret nor --git-webhook-secret-file."""
_NAME = "trainops gitops"
log = logging.getLogger("trainops")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gitops",
        help="run GitOps (JobRepositories), its HTTP API and the dashboard as a service",
        description="Sync every JobRepository from Git, and serve the HTTP API "
        "(/api/v1/…), the push webhook (/api/v1/webhooks/git), the dashboard (/) and "
        "/healthz, /readyz, /metrics on one port. Every request but the push webhook and the "
        "probes needs a bearer token the API server accepts and is authorized as its user "
        "(TokenReview, SubjectAccessReview); the dashboard has a login form for it. Several "
        "replicas elect one reconciling leader through a Lease; every replica serves the API "
        "and the dashboard, and a sync or refresh asked of any replica is recorded on the "
        "JobRepository, where the leader finds and carries it out. Ctrl-C or SIGTERM stops "
        "it cleanly (the lease is released).",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster credentials, else $KUBECONFIG)",
    )
    runtime.add_client_arguments(parser)
    parser.add_argument(
        "--bind",
        default="0.0.0.0",
        metavar="ADDR",
        help="address of the API, dashboard and probes (default 0.0.0.0)",
    )
    parser.add_argument(
        "--port",
        type=port_number(allow_zero=True),
        default=8080,
        help="port of the API, dashboard and probes (default 8080; 0 picks a free one)",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        type=Path,
        default=Path("~/.cache/trainops/gitops"),
        help="where fetched Git repositories are kept (created; default "
        "~/.cache/trainops/gitops; in a pod, a writable emptyDir)",
    )
    parser.add_argument(
        "--namespace",
        metavar="NS",
        help="sync the JobRepositories of this namespace only (default: every namespace; "
        "training jobs are watched in every namespace either way)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one reconciling replica through a coordination.k8s.io Lease "
        "(default: on; off: this process reconciles, whatever else runs)",
    )
    parser.add_argument(
        "--lease-namespace",
        default="kube-system",
        metavar="NS",
        help="namespace of the Lease trainops-gitops (default kube-system, as trainops up's)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="repositories reconciled at once (default 2)"
    )
    parser.add_argument(
        "--git-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="longest a git fetch may take (default 60)",
    )
    parser.add_argument(
        "--ls-remote-timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="longest a round's first step, git ls-remote, may take: a remote that does not "
        "answer costs this (default 15; at most --git-timeout)",
    )
    parser.add_argument(
        "--max-rounds-per-namespace",
        type=int,
        default=1,
        metavar="N",
        help="rounds of one namespace's repositories in flight at once, so one tenant's slow "
        "remotes cannot hold every worker (default 1)",
    )
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--git-webhook-secret",
        metavar="NAMESPACE/NAME",
        type=up_gitops.secret_ref,
        help="a Secret whose key `secret` push webhooks must be signed with (GitHub, Gitea) "
        "or carry (GitLab), read at start",
    )
    secret.add_argument(
        "--git-webhook-secret-file",
        metavar="FILE",
        type=Path,
        help="the same secret from a file (e.g. a mounted Secret key), read at start; "
        f"without either flag, ${SECRET_ENV} when set; without any, pushes are accepted "
        "unsigned (they only trigger fetches)",
    )
    parser.add_argument(
        "--trusted-proxy",
        metavar="CIDR",
        action="append",
        default=[],
        type=_proxy,
        help="an address or CIDR (repeat, or comma-separate) of the TLS proxy in front, e.g. "
        "the Ingress controller's pods: its X-Forwarded-Proto: https makes the login cookie "
        "Secure (from anyone else the header is ignored; default: nobody)",
    )
    parser.add_argument(
        "--stream-recheck",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how often an open event stream reviews its token again (TokenReview) and ends "
        "once it is no longer valid (default 30)",
    )
    parser.add_argument(
        "--stream-lifetime",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="the longest an event stream stays open; the browser reconnects (default 3600)",
    )
    up_gitops.add_tenancy_arguments(
        parser,
        "What each JobRepository may reach. By default each acts as its "
        "spec.serviceAccountName in its own namespace, and local repositories are refused.",
    )
    gitops_limits.add_limit_arguments(parser)
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gitops.engine.redact import RedactingFormatter

    level = getattr(logging, str(args.log_level).upper(), None)
    if not isinstance(level, int):
        return _usage(f"--log-level {args.log_level}: use DEBUG, INFO, WARNING or ERROR")
    if args.workers < 1:
        return _usage("--workers must be at least 1")
    if not args.git_timeout > 0:
        return _usage("--git-timeout must be more than 0 seconds")
    if not args.ls_remote_timeout > 0:
        return _usage("--ls-remote-timeout must be more than 0 seconds")
    if args.max_rounds_per_namespace < 1:
        return _usage("--max-rounds-per-namespace must be at least 1")
    if not args.stream_recheck > 0 or not args.stream_lifetime > 0:
        return _usage("--stream-recheck and --stream-lifetime must be more than 0 seconds")
    # Every line masked (`gitops.engine.redact`): a repoURL may carry a token, and git echoes it.
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    try:
        return asyncio.run(_main(args))
    except _StartError as exc:
        print(f"{_NAME}: {exc}", file=sys.stderr)
        return 1


class _StartError(RuntimeError):
    """Why the service cannot start, worded for the user (one line)."""


def _usage(message: str) -> int:
    print(f"{_NAME}: {message}", file=sys.stderr)
    return 2


async def _main(args: argparse.Namespace) -> int:
    from gitops.api import routes as api
    from gitops.runtime.manager import GitOpsSettings
    from trainops.commands import gitops_service, kubeconnect, runtime

    cache_dir = _cache_dir(args.cache_dir)
    namespace = args.namespace
    probe = "/apis/gitops.trainops.dev/v1alpha1/" + (
        f"namespaces/{namespace}/jobrepositories" if namespace else "jobrepositories"
    )
    try:
        # Checked once at start (a wrong file, server or CRD is one line); later outages are
        # retried by the informers and the leader election.
        client = await kubeconnect.connect(
            Path(args.kubeconfig).expanduser() if args.kubeconfig else None,
            field_manager="trainops-gitops",
            probe=probe,
            command=_NAME,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
        )
    except kubeconnect.StartError as exc:
        text = str(exc)
        if " answered 404" in text:
            text += " (is the JobRepository CRD installed? `trainops crds | kubectl apply "
            "--server-side -f -`)"
        raise _StartError(text) from None
    try:
        secret = await _webhook_secret(client, args)
        manager = runtime.new_manager(
            client, leader_elect=args.leader_elect, lease_namespace=args.lease_namespace
        )
        built = gitops_service.component(
            manager,
            cache_dir,
            GitOpsSettings(
                workers=args.workers,
                git_timeout=args.git_timeout,
                ls_remote_timeout=args.ls_remote_timeout,
                max_rounds_per_namespace=args.max_rounds_per_namespace,
                namespace=namespace,
                boundaries=up_gitops.boundaries(args, embedded=False),
                limits=gitops_limits.limits(args),
            ),
            webhook_secret=secret,
            allow_remote_writes=True,  # every request authenticated and authorized
            trusted_proxies=args.trusted_proxy,
            stream_recheck=args.stream_recheck,
            stream_lifetime=args.stream_lifetime,
        )
        try:
            runner, port = await api.serve(built.app, args.bind, args.port)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise _StartError(f"--port {args.port}: in use on {args.bind}") from None
            raise _StartError(f"--bind {args.bind} --port {args.port}: {e.strerror or e}") from None
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        try:
            manager.start()
            log.info(
                "gitops serving the API, push webhook, dashboard and /healthz /readyz /metrics "
                "on %s:%s (lease %s)",
                args.bind,
                port,
                f"{args.lease_namespace}/trainops-gitops" if args.leader_elect else "off",
            )
            await stopping.wait()
        finally:
            await manager.stop()  # the lease is released: a standby takes over at once
            await runner.cleanup()
    finally:
        await client.close()
    return 0


def _proxy(value: str) -> str:
    """A `--trusted-proxy` value, checked (argparse says which is wrong)."""
    from gitops.api.rules import proxy_networks

    try:
        proxy_networks([value])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def _cache_dir(path: Path) -> Path:
    """`--cache-dir`, created (0700: fetched repositories may be private) and writable."""
    path = path.expanduser().absolute()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise _StartError(f"--cache-dir {path}: {e.strerror or e}") from None
    return path


async def _webhook_secret(client: Client, args: argparse.Namespace) -> bytes | None:
    """The push hook's secret: --git-webhook-secret's Secret, --git-webhook-secret-file's
    content (one trailing newline dropped), else $TRAINOPS_GIT_WEBHOOK_SECRET, else None."""
    from kube import errors

    if args.git_webhook_secret:
        try:
            return await up_gitops.webhook_secret(client, args.git_webhook_secret)
        except RuntimeError as e:
            raise _StartError(str(e)) from None
        except errors.APIError as e:
            raise _StartError(f"--git-webhook-secret {args.git_webhook_secret}: {e}") from None
    if args.git_webhook_secret_file is not None:
        where = f"--git-webhook-secret-file {args.git_webhook_secret_file}"
        try:
            data = args.git_webhook_secret_file.expanduser().read_bytes()
        except OSError as e:
            raise _StartError(f"{where}: {e.strerror or e}") from None
        data = data.removesuffix(b"\n").removesuffix(b"\r")
        if not data:
            raise _StartError(f"{where}: the file is empty")
        return data
    value = os.environ.get(SECRET_ENV, "")
    return value.encode() if value else None
