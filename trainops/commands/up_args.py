"""`trainops up`'s command line: its flags (`add_arguments`), their argparse types (`port_number`,
`image_env`) and the default data directory. The types and `default_data_dir` are shared by the
other commands that take a port or a data directory (`webhook`, `controller`, `apiserver`,
`repo`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from trainops.commands import gitops_limits, up_gitops

__all__ = ["add_arguments", "default_data_dir", "image_env", "port_number"]


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "trainops"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every flag of `trainops up` on `parser`."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where state, logs and the kubeconfig live (default: {default_data_dir()})",
    )
    parser.add_argument(
        "--port",
        type=port_number(allow_zero=True),
        default=0,
        help="API server port (default: the one used last time, else a free one)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="FILE",
        help="run on the existing cluster in FILE instead of the embedded API server: the CRDs "
        "and webhook configurations (by URL, to this machine) are installed there, the "
        "controller and GitOps work on it",
    )
    node = parser.add_mutually_exclusive_group()
    node.add_argument(
        "--node",
        dest="node",
        action="store_true",
        default=None,
        help="join this machine to the cluster as a node that runs pods as local processes "
        "(the default when the API server is on a loopback address, as the embedded one is)",
    )
    node.add_argument(
        "--no-node",
        dest="node",
        action="store_false",
        help="run no node, with --kubeconfig only: the cluster's own nodes run the pods (the "
        "default when the API server in --kubeconfig is not on a loopback address)",
    )
    parser.add_argument(
        "--kubelet-client-ca",
        type=Path,
        default=None,
        metavar="FILE",
        help="the CA whose client certificates the node's log endpoint accepts: the one that "
        "signed the API server's --kubelet-client-certificate (default: the CA of the "
        "kubeconfig's cluster)",
    )
    parser.add_argument(
        "--webhook-url",
        default=None,
        metavar="URL",
        help="with --kubeconfig: https://HOST:PORT of this machine that the API server reaches; "
        "the webhook listens there and is registered with it (default: a loopback port, "
        "which only an API server on this machine reaches)",
    )
    parser.add_argument(
        "--no-controller",
        dest="controller",
        action="store_false",
        help="run without the job controller (another install on the cluster runs it)",
    )
    parser.add_argument(
        "--no-gitops",
        dest="gitops",
        action="store_false",
        help="run without syncing JobRepositories (another install on the cluster does); the "
        "dashboard still shows them",
    )
    parser.add_argument(
        "--dashboard-port",
        type=port_number(allow_zero=False),
        default=None,
        metavar="PORT",
        help="port of the HTTP API on 127.0.0.1 (default: the one the last `up` on this data "
        "directory used, else a free one; recorded in DATA_DIR/api.json for `trainops repo`); "
        "the dashboard is served there too, at /",
    )
    parser.add_argument(
        "--repo", metavar="GIT_URL", help="sync training jobs from this Git repository"
    )
    parser.add_argument(
        "--path",
        metavar="DIR",
        help="directory of the repository to sync (with --repo; default: the repository's root)",
    )
    parser.add_argument(
        "--revision",
        metavar="REF",
        help="branch, tag or commit to sync (with --repo; default: the remote's HEAD branch)",
    )
    parser.add_argument(
        "--repo-name",
        metavar="NAME",
        type=up_gitops.dns_name,
        help="name of --repo's JobRepository in namespace default (default: the repository's "
        "base name, or with a short hash of URL and path when that name follows another "
        "source; an existing repository is never repointed at another URL)",
    )
    parser.add_argument(
        "--git-webhook-secret",
        metavar="NAMESPACE/NAME",
        type=up_gitops.secret_ref,
        help="a Secret whose key `secret` push webhooks must be signed with (GitHub, Gitea) or "
        "carry (GitLab) at /api/v1/webhooks/git, read when up starts (restart up after "
        "changing it); without it pushes are accepted unsigned",
    )
    parser.add_argument(
        "--image",
        dest="images",
        action="append",
        type=image_env,
        default=[],
        metavar="IMAGE=ENV_DIR",
        help="run containers whose image matches IMAGE (a glob, e.g. 'tensorflow/*') with the "
        "Python environment ENV_DIR (a virtualenv or conda env: its bin/ first on PATH); "
        "repeatable, the first match wins; unmatched images run with up's own PATH",
    )
    up_gitops.add_tenancy_arguments(parser)
    gitops_limits.add_limit_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug output")


def image_env(text: str) -> Any:
    """An argparse type for `--image IMAGE=ENV_DIR`: the directory must exist and have bin/."""
    from trainops.commands import local

    absent = local.missing("--image")
    if absent is not None:
        raise argparse.ArgumentTypeError(absent)
    from localcluster.kubelet import images

    parsed = images.parse(text)
    if isinstance(parsed, str):
        raise argparse.ArgumentTypeError(parsed)
    env_dir = Path(parsed.env_dir).expanduser().absolute()
    if not (env_dir / "bin").is_dir():
        raise argparse.ArgumentTypeError(
            f"{parsed.env_dir}: no such Python environment (a directory with bin/ is expected)"
        )
    return images.ImageEnv(parsed.pattern, str(env_dir))


def port_number(*, allow_zero: bool) -> Any:
    """An argparse type for a TCP port, so `--port 99999` is a usage error, not a bind error."""
    low = 0 if allow_zero else 1

    def parse(text: str) -> int:
        try:
            port = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
        if not low <= port <= 65535:
            raise argparse.ArgumentTypeError(f"{port} is not a port number ({low}-65535)")
        return port

    parse.__name__ = "port"
    return parse
