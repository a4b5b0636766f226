"""`trainops up`: the whole product on one machine, no cluster needed (or on one you have).

Starts, in one process and one event loop: the embedded API server (`localcluster`) — or, with
`--kubeconfig FILE`, nothing of the kind: the API server in FILE is used — and then, the same
way for either (`up_cluster`): the CRDs (from `trainops crds`' builder), the admission webhook
over TLS on a loopback port (certificates from `certs.pki`, registered with
Mutating/ValidatingWebhookConfigurations whose `clientConfig.url` and `caBundle` point at it),
the process kubelet with its scheduler and Deployment controller (`--node`), the job
controller, GitOps and the HTTP API. State lives in the data directory, so running `up` again
resumes: objects (embedded), pod logs, the CA and the kubeconfig (`DIR/kubeconfig`).

SIGINT/SIGTERM stop everything in reverse order; the kubelet ends every pod process first and
reports how each ended, so nothing runs on after `up` returns. The flags are in `up_args`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitops.engine.redact import RedactingFormatter, redact
from gitops.engine.urls import absolute_local_path
from trainops.commands import local, runtime, up_args, up_cluster, up_gitops

if TYPE_CHECKING:
    from controller.manager import Controller
    from kube.manager import Manager

__all__ = [
    "add_controller",
    "lock_data_dir",
    "register",
    "run",
    "secure_data_dir",
]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up",
        help="run the API server, webhook, kubelet, controller and GitOps on this machine",
        description="Run trainops locally: an embedded Kubernetes API server, the admission "
        "webhook, a kubelet that runs pods as local processes, the job controller, GitOps "
        "(with --repo) and its HTTP API. With --kubeconfig, the same on an existing cluster "
        "instead of the embedded API server. Ctrl-C stops everything; jobs running then are "
        "recreated when up starts again (without using their backoffLimit).",
    )
    up_args.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    absent = local.missing("trainops up")
    if absent is not None:
        print(absent, file=sys.stderr)
        return 1
    if (args.path or args.revision or args.repo_name) and not args.repo:
        print("trainops up: --path, --revision and --repo-name need --repo", file=sys.stderr)
        return 2
    if args.repo:
        args.repo = absolute_local_path(args.repo, os.getcwd())
    kubeconfig = getattr(args, "kubeconfig", None)
    if kubeconfig is not None and args.port:
        print(
            "trainops up: --port is the embedded API server's; not with --kubeconfig",
            file=sys.stderr,
        )
        return 2
    if kubeconfig is None and getattr(args, "node", None) is False:
        print(
            "trainops up: --no-node needs --kubeconfig: the embedded API server has no other node",
            file=sys.stderr,
        )
        return 2
    if kubeconfig is None and getattr(args, "webhook_url", None):
        print(
            "trainops up: --webhook-url needs --kubeconfig: the embedded API server calls the "
            "webhook on loopback",
            file=sys.stderr,
        )
        return 2
    problem = up_gitops.repo_problem(args)
    if problem is not None:
        print(f"trainops up: {redact(problem)}", file=sys.stderr)
        return 2
    if kubeconfig is not None:
        args.kubeconfig = kubeconfig.expanduser().absolute()
        problem = up_cluster.webhook_reach_problem(
            args.kubeconfig, getattr(args, "webhook_url", None)
        )
        if problem:
            print(f"trainops up: {problem}", file=sys.stderr)
            return 2
    # Every line masked (`gitops.engine.redact`): a --repo URL may carry a token, and git echoes it.
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, handlers=[handler]
    )
    up_gitops.gitops_logging(args.verbose)
    data_dir = (args.data_dir or up_args.default_data_dir()).expanduser().resolve()
    if data_dir.exists() and not data_dir.is_dir():
        print(f"trainops up: --data-dir {data_dir} is not a directory", file=sys.stderr)
        return 2
    # Everything up writes (and git, the shims) is its user's alone; containers get 0022 back.
    os.umask(0o077)
    secure_data_dir(data_dir)  # before anything else touches it, so the log names all
    from localcluster import datadir

    try:
        datadir.make_private_dir(data_dir)
    except OSError as e:
        print(f"trainops up: cannot create {data_dir}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        lock = lock_data_dir(data_dir)
    except OSError as e:
        print(f"trainops up: cannot use {data_dir}: {e.strerror}", file=sys.stderr)
        return 2
    if isinstance(lock, str):
        print(f"trainops up: {lock}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_main(args, data_dir))
    except KeyboardInterrupt:
        return 130
    finally:
        lock.close()


def secure_data_dir(data_dir: Path) -> None:
    """Tighten a data directory an older version left readable by other users (it holds every
    Secret, the admin token and keys), and say so in the log. Nothing to do for a new one."""
    if not data_dir.is_dir():
        return
    from localcluster import datadir

    changed = datadir.secure(data_dir)
    if changed:
        logging.getLogger("trainops.up").warning(
            "%s was readable by other local users; tightened (group/other access removed): %s",
            data_dir,
            datadir.describe(changed),
        )


def lock_data_dir(data_dir: Path, command: str = "up") -> Any:
    """Hold `DATA_DIR/up.lock` while running: two `up`s (or an `up` and an `apiserver`) on one
    data directory would run every pod twice, fight over the store and rewrite each other's
    kubeconfig. The kernel drops the lock if this process dies.

    Returns the open lock file, or a message naming the holder (`PID COMMAND` is kept in it)."""
    import fcntl

    path = data_dir / "up.lock"
    # Held open for the lifetime of the command; 0600 like everything in the data directory.
    f = open(path, "a+", opener=lambda p, flags: os.open(p, flags, 0o600))  # noqa: SIM115
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid, _, holder = f.read().strip().partition(" ")
        f.close()
        return (
            f"{data_dir} is in use by another trainops {holder or 'up'} (pid {pid or '?'}); "
            "stop it first"
        )
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()} {command}")
    f.flush()
    return f


STOP_STEP_SECONDS = 45.0
"""The most one stop step may take. Above the node's own bounds (pods' grace periods capped at
10 s, their last reports, the shims' exits), which are what normally ends a step."""


@dataclass
class Stack:
    """Everything `up` started, in start order (stopped in reverse)."""

    data_dir: Path
    kubeconfig: Path | None = None
    stops: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Called on a second Ctrl-C while stopping: stop waiting for grace periods.
    hurry: list[Any] = field(default_factory=list)
    stopping: bool = False
    gitops: Any = None
    """The GitOps reconciler (a `gitops.runtime.hub.Hub`), once started."""
    gitops_app: Any = None
    """The GitOps component's application (API, push hook, dashboard, probes), to serve."""
    metrics_registries: list[Any] = field(default_factory=list)
    """Prometheus registries served on the API's `/metrics` besides GitOps' own."""
    api_url: str | None = None
    api_token: str | None = None
    """The embedded API server's token for the HTTP API's user (`DATA_DIR/api-token`)."""
    login_url: str | None = None
    """The dashboard's one-time login link (embedded: it carries `api_token`)."""
    server: str | None = None
    """The API server's URL, once connected."""
    pod_gateway: str | None = None
    """The host's address on the pod network's bridge, when pods have networks of their own
    (where they reach the controller's progress endpoint)."""

    async def stop(self) -> None:
        """Run the stop steps in reverse start order, each for `STOP_STEP_SECONDS` at most: a
        step that hangs (a server that never answers) is cancelled and named, and the rest still
        run, so `up` always exits."""
        self.stopping = True
        log = logging.getLogger("trainops.up")
        for stop in reversed(self.stops):
            name = getattr(stop, "__qualname__", stop)
            log.debug("stopping: %s", name)
            limit = asyncio.timeout(STOP_STEP_SECONDS)
            try:
                async with limit:
                    await stop()
            except Exception as e:  # keep stopping the rest
                if limit.expired():
                    log.warning("stopping: gave up on %s after %g s", name, STOP_STEP_SECONDS)
                else:
                    log.warning("stopping: %s: %s", name, e)
        self.stops.clear()


async def _main(args: argparse.Namespace, data_dir: Path) -> int:
    stack = Stack(data_dir)
    stopped_by: list[int] = []
    stop_event = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        stopped_by.append(sig)
        if stack.stopping and stack.hurry:
            print("trainops up: stopping now (remaining pod processes are killed)", file=sys.stderr)
            for hurry in stack.hurry:
                hurry()
            stack.hurry.clear()
        stop_event.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # HUP: the terminal closed
        loop.add_signal_handler(sig, on_signal, sig)
    started = time.monotonic()
    print(f"trainops up: starting (data in {data_dir})...", file=sys.stderr, flush=True)
    try:
        # Not cancelled by a signal: a component cancelled half-way could leave pod processes
        # running that no stop function knows of. Starting takes a few seconds; a signal that
        # arrives meanwhile stops everything right after, without announcing a running system.
        await start_stack(stack, args, data_dir)
    except Exception as e:
        message = redact(_describe_start_error(e, stack, args, data_dir))
        print(f"trainops up: {message}", file=sys.stderr)
        await stack.stop()
        return 1
    if stop_event.is_set():
        print("trainops up: interrupted while starting; stopping", file=sys.stderr, flush=True)
        await stack.stop()
        print("trainops up: stopped", file=sys.stderr, flush=True)
        return 128 + stopped_by[0]
    _banner(stack, args, time.monotonic() - started)
    await stop_event.wait()
    print(
        "trainops up: stopping (pod processes are being ended; Ctrl-C again to kill them now)...",
        file=sys.stderr,
        flush=True,
    )
    await stack.stop()
    print("trainops up: stopped", file=sys.stderr, flush=True)
    return 0


def _describe_start_error(
    error: Exception, stack: Stack, args: argparse.Namespace, data_dir: Path
) -> str:
    """What went wrong starting, in the user's terms (the flag to change, not an errno)."""
    import errno
    import sqlite3

    from kube.errors import APIError

    if isinstance(error, OSError) and error.errno == errno.EADDRINUSE and args.port:
        return (
            f"--port {args.port}: the port is in use by another program; "
            "choose another, or leave --port out to pick a free one"
        )
    if isinstance(error, up_cluster.StartError):
        return str(error)
    if isinstance(error, APIError):
        return up_cluster.describe_api_error(
            error, stack.server or "?", stack.kubeconfig or data_dir / "kubeconfig"
        )
    if isinstance(error, sqlite3.DatabaseError):
        return (
            f"the stored state in {data_dir} cannot be read ({error}); "
            "nothing was changed: move the directory aside to start afresh, or use "
            "another --data-dir"
        )
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}"
    return str(error) or type(error).__name__


async def start_stack(stack: Stack, args: argparse.Namespace, data_dir: Path) -> None:
    """Get a kubeconfig — the embedded API server's, or `--kubeconfig` — then run the product
    against it; from the kubeconfig on, the steps are the same for any API server."""
    kubeconfig: Path | None = getattr(args, "kubeconfig", None)
    if kubeconfig is None:
        kubeconfig = await _start_embedded(stack, args, data_dir)
    stack.kubeconfig = kubeconfig
    # One client for `up`'s own writes and the controller, closed after both have stopped.
    client = await up_cluster.connect(kubeconfig)
    stack.stops.append(client.close)
    stack.server = client.host
    secret = await up_gitops.webhook_secret(client, getattr(args, "git_webhook_secret", None))
    if getattr(args, "kubeconfig", None) is not None:
        stack.notes.append(f"API server  {client.host} (from {kubeconfig})")

    me = up_cluster.instance(data_dir)
    run_controller = getattr(args, "controller", True)
    run_gitops = getattr(args, "gitops", True)
    wanted = [k for k, on in (("controller", run_controller), ("gitops", run_gitops)) if on]
    await up_cluster.check_leases(client, me, wanted)

    async def release_leases() -> None:
        await up_cluster.release_leases(client, me)

    # After the controllers have stopped (stops run in reverse).
    stack.stops.append(release_leases)
    await up_cluster.install_crds(client)
    url = await up_cluster.start_webhook(
        stack, client, data_dir, me, getattr(args, "webhook_url", None)
    )
    stack.notes.append(f"webhook     {url}")
    node = getattr(args, "node", None)
    if node is None:
        node = up_cluster.is_loopback(client.host)
    if node:
        await up_cluster.start_node(
            stack,
            kubeconfig,
            data_dir,
            # The embedded server is this data directory's alone; a shared cluster gets a node
            # name of this instance's.
            node_name="trainops" if getattr(args, "kubeconfig", None) is None else me.node_name,
            node_labels=None if getattr(args, "kubeconfig", None) is None else me.labels,
            client_ca=getattr(args, "kubelet_client_ca", None),
            images=tuple(getattr(args, "images", None) or ()),
        )
    else:
        stack.notes.append("kubelet     none (--no-node): the cluster's own nodes run the pods")
    # One Manager for the controller and GitOps: each kind they both read (the training jobs)
    # is cached and watched once. A stable identity (the data directory's instance): an `up`
    # restarted after a crash holds its leases again at once instead of waiting them out.
    manager = runtime.new_manager(client, identity=me.identity)
    if run_controller:
        controller = add_controller(stack, manager, stack.pod_gateway)
        if controller.progress is not None:
            # Before the Manager starts: every pod is created with the progress env.
            await _start_progress(stack.data_dir, controller.progress)
            stack.stops.append(controller.progress.stop)
            stack.notes.append(f"progress    {controller.progress.base_url} (docs/PROGRESS.md)")
    else:
        stack.notes.append("controller  none (--no-controller): another install runs the jobs")
    await up_gitops.start_gitops(
        stack, manager, data_dir, args, reconcile=run_gitops, secret=secret
    )
    # Started once everything is added (every handler sees every object), and stopped before
    # the node (stops run in reverse), so it never restarts the pods the node is ending.
    manager.start()
    stack.stops.append(manager.stop)
    stack.metrics_registries.append(manager.metrics)
    await up_gitops.start_api(stack, client, args, data_dir)


async def _start_embedded(stack: Stack, args: argparse.Namespace, data_dir: Path) -> Path:
    from localcluster.apiserver import ApiServerConfig, start_apiserver

    api = await start_apiserver(
        ApiServerConfig(data_dir=data_dir, port=getattr(args, "port", 0) or 0)
    )
    stack.stops.append(api.stop)
    stack.api_token = api.api_token
    stack.notes.append(f"API server  {api.url}")
    return api.kubeconfig


def add_controller(stack: Stack, manager: Manager, pod_gateway: str | None = None) -> Controller:
    """The job controller on `up`'s Manager, through the same client runtime as on a cluster."""
    from controller.manager import Controller, ControllerSettings
    from controller.progress_server import ProgressSettings

    # Pods are local processes: the endpoint listens on a free port of loopback, or of the
    # pod network's bridge when each pod has a network namespace (its 127.0.0.1 is its own).
    host = pod_gateway or "127.0.0.1"
    progress = ProgressSettings(bind=host, port=0, freebind=pod_gateway is not None)
    controller = Controller(manager, ControllerSettings(progress=progress))
    stack.metrics_registries.append(controller.metrics.registry)
    stack.notes.append("controller  running TensorFlowTrainingJobs and XGBoostTrainingJobs")
    return controller


async def _start_progress(data_dir: Path, progress: Any) -> None:
    """The progress endpoint on the port of the last run (`DATA_DIR/progress-port`): pods that
    outlived a restart of `up` keep the URL they were given; a free port if it is taken."""
    import dataclasses

    path = data_dir / "progress-port"
    try:
        previous = int(path.read_text())
    except (OSError, ValueError):
        previous = 0
    if previous:
        progress.settings = dataclasses.replace(progress.settings, port=previous)
        try:
            await progress.start()
        except OSError:
            progress.settings = dataclasses.replace(progress.settings, port=0)
            await progress.start()
    else:
        await progress.start()
    path.write_text(f"{progress.port}\n")


def _banner(stack: Stack, args: argparse.Namespace, seconds: float) -> None:
    kubeconfig = stack.kubeconfig or stack.data_dir / "kubeconfig"
    lines = [f"trainops is up ({seconds:.1f}s), data in {stack.data_dir}", ""]
    lines += [f"  {n}" for n in stack.notes]
    if stack.login_url:
        lines.append(f"  dashboard   {stack.login_url}")
        lines.append("              (a login link: keep it to yourself; it sets a cookie)")
    elif stack.api_url:
        lines.append(f"  dashboard   {stack.api_url}/ (log in with a token of the cluster)")
    lines += [
        "",
        "Use it:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "",
        f"Stop with Ctrl-C (or SIGTERM); run `{_resume_command(args)}` again to resume.",
    ]
    print("\n".join(lines), flush=True)


def _resume_command(args: argparse.Namespace) -> str:
    """`up` on the same data directory and cluster (`--data-dir`, `--kubeconfig` as given), with
    the `--image` mappings (they are not remembered)."""
    words = ["trainops", "up"]
    if getattr(args, "data_dir", None) is not None:
        words += ["--data-dir", str(args.data_dir)]
    if getattr(args, "kubeconfig", None) is not None:
        words += ["--kubeconfig", str(args.kubeconfig)]
    for mapping in getattr(args, "images", None) or []:
        words += ["--image", f"{mapping.pattern}={mapping.env_dir}"]
    return shlex.join(words)
