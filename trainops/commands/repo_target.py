"""Where `trainops repo` finds the GitOps API, and how it reaches one installed in a cluster.

Two ways in:

- **direct**: an address (`--server`, `$TRAINOPS_SERVER`, or the `api.json` a running
  `trainops up` wrote in its data directory), with the token in `Authorization: Bearer`;
- **through the API server's service proxy**, with nothing but a kubeconfig: the Service
  `trainops-gitops` in `trainops-system` (deploy/gitops: plain HTTP on port 8080, named `http`)
  at `/api/v1/namespaces/trainops-system/services/http:trainops-gitops:http/proxy/…`. The API
  server authenticates the request with the kubeconfig's credentials and authorizes it as
  `get`/`create`/`delete` on `services/proxy` in `trainops-system`; then it removes the
  `Authorization` header (kube-apiserver drops it once authenticated) before passing the
  request on. The trainops API logs its users in with their own Kubernetes token, so the token
  travels in what the API also accepts and the proxy passes on: its login cookie
  (`trainops-token`, `gitops.api.rules.COOKIE`). It is the kubeconfig's bearer token (`token`,
  `tokenFile`, an exec plugin's), or `--token`/`$TRAINOPS_TOKEN`. A kubeconfig user with a client
  certificate has no token to pass: it needs `--token` (e.g. `kubectl create token NAME`).

`choose` decides which (pure); `proxy_request` builds the path and headers (pure).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SERVICE",
    "SERVICE_NAMESPACE",
    "SERVICE_PORT",
    "Choice",
    "choose",
    "cookie_safe",
    "proxy_prefix",
    "proxy_request",
]

SERVICE_NAMESPACE = "trainops-system"
SERVICE = "trainops-gitops"
SERVICE_PORT = "http"
"""deploy/gitops/service.yaml: port 8080, named `http`, served as plain HTTP in the cluster."""


@dataclass(frozen=True)
class Choice:
    """How to reach the API: `server` (direct) or `kubeconfig` (through the service proxy;
    None with `proxy` means the default: $KUBECONFIG, in-cluster, or ~/.kube/config).
    `why` says, for error messages, why this way was taken and what else was looked at."""

    server: str | None = None
    token: str | None = None
    proxy: bool = False
    kubeconfig: Path | None = None
    why: str = ""


def choose(
    *,
    server: str | None,
    token: str | None,
    kubeconfig: Path | None,
    data_dir: Path,
    data_dir_given: bool,
    local_url: str | None,
    local_token: str | None,
    env_kubeconfig: str | None,
    env_server: str | None,
    local_server: str | None,
    default_kubeconfig_exists: bool,
    in_cluster: bool,
    beside_kubeconfig: tuple[Path, str, str | None] | None = None,
) -> Choice | str:
    """The way in, or why there is none (one line, naming what was looked at).

    In order: `--server`/`$TRAINOPS_SERVER`; `--kubeconfig` (the service proxy); `--data-dir`
    (its `trainops up`); a running `trainops up` in the default data directory — unless
    $KUBECONFIG names another cluster than that `up`'s own API server (`env_server` is not
    `local_server`), whose in-cluster install is then meant; else any kubeconfig at all
    ($KUBECONFIG, in-cluster credentials, ~/.kube/config) through the service proxy.

    `beside_kubeconfig` is (directory, url, token) of a running `trainops up` whose data
    directory holds the kubeconfig in use (`--kubeconfig`, else the first of $KUBECONFIG): that
    kubeconfig is the up's own (`DATA_DIR/kubeconfig`), and its API is the one meant (the
    embedded API server has no service proxy to go through)."""
    if server:
        return Choice(server=server, token=token, why=f"--server {server}")
    if beside_kubeconfig is not None and not data_dir_given:
        up_dir, up_url, up_token = beside_kubeconfig
        return Choice(server=up_url, token=token or up_token, why=f"trainops up of {up_dir}")
    if kubeconfig is not None:
        return Choice(
            token=token, proxy=True, kubeconfig=kubeconfig, why=f"--kubeconfig {kubeconfig}"
        )
    no_up = f"no trainops API is running for {data_dir} (no api.json there)"
    elsewhere = bool(env_kubeconfig) and env_server is not None and env_server != local_server
    if local_url is not None and (data_dir_given or not elsewhere):
        return Choice(
            server=local_url, token=token or local_token, why=f"trainops up of {data_dir}"
        )
    if data_dir_given:
        return no_up
    if env_kubeconfig:
        if local_url is not None:
            why = f"$KUBECONFIG ({env_server}: not the cluster of trainops up in {data_dir})"
        else:
            why = f"{no_up}; $KUBECONFIG"
        return Choice(token=token, proxy=True, why=why)
    if in_cluster:
        return Choice(token=token, proxy=True, why=f"{no_up}; in-cluster credentials")
    if default_kubeconfig_exists:
        return Choice(token=token, proxy=True, why=f"{no_up}; ~/.kube/config")
    return f"{no_up}, and no kubeconfig to find one in a cluster ($KUBECONFIG unset, no ~/.kube/config)"


def proxy_prefix() -> str:
    """The API server path of the trainops API's root through the service proxy."""
    return f"/api/v1/namespaces/{SERVICE_NAMESPACE}/services/http:{SERVICE}:{SERVICE_PORT}/proxy"


def cookie_safe(token: str) -> bool:
    """Whether `token` can travel as a cookie value (RFC 6265 cookie-octets): a JWT can."""
    return bool(token) and all(0x21 <= ord(c) <= 0x7E and c not in '",;\\' for c in token)


def proxy_request(path: str, token: str | None) -> tuple[str, dict[str, str]]:
    """The API server path of the trainops API's `path` (`/api/v1/repositories`) and the
    headers that carry the user's `token` past the proxy (none without a token)."""
    from gitops.api.rules import COOKIE

    headers = {"Cookie": f"{COOKIE}={token}"} if token else {}
    return proxy_prefix() + path, headers
