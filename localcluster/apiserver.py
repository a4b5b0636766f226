"""Start and stop the embedded API server (in-process entry point).

`start_apiserver(ApiServerConfig(data_dir))` opens storage, creates or reuses credentials,
creates the default namespaces on first start, starts the in-process controllers (garbage
collector, namespace lifecycle, service accounts, the root-CA publisher) and serves HTTPS on loopback. It returns a `RunningApiServer`
whose `kubeconfig` any Kubernetes client can use.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from localcluster import datadir, kubeconfig
from localcluster.api.registry import NAMESPACES
from localcluster.controllers.manager import Controllers
from localcluster.http import subresources
from localcluster.http.app import create_app
from localcluster.store import storage, watch
from localcluster.store.records import clone
from localcluster.store.storage import Storage
from localcluster.write import writes
from localcluster.write.state import Server

__all__ = ["DEFAULT_NAMESPACES", "ApiServerConfig", "RunningApiServer", "start_apiserver"]

log = logging.getLogger("localcluster.apiserver")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DB_FILE = "state.db"


@dataclass
class ApiServerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0  # 0: reuse the port stored in data_dir if any, else pick a free one
    bookmark_interval: float = 60.0  # seconds between BOOKMARK events on idle watches
    event_history: int = storage.DEFAULT_HISTORY  # events kept for watches from a resourceVersion
    event_history_bytes: int = storage.DEFAULT_HISTORY_BYTES  # … and at most this many bytes
    watch_queue_events: int = watch.MAX_BACKLOG  # a subscriber further behind is cut off (re-lists)
    watch_queue_bytes: int = watch.MAX_BACKLOG_BYTES  # … or with this many bytes waiting
    event_ttl: float = 3600.0  # seconds an Event object lives after its last update


@dataclass
class RunningApiServer:
    url: str
    kubeconfig: Path
    ca_file: Path
    token: str
    data_dir: Path
    server: Server
    api_token: str
    """The HTTP API's and dashboard's user's token (`DATA_DIR/api-token`)."""
    _runner: web.AppRunner = field(repr=False)
    _controllers: Controllers = field(repr=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def stop(self) -> None:
        """Stop serving, end open watches, stop the controllers, close the webhook sessions and
        storage."""
        self.server.hub.close_all()
        await self._controllers.stop()
        await self._runner.cleanup()
        await self.server.admission.close()
        await self.server.store.close()


def _bind(host: str, port: int, remembered: int) -> socket.socket:
    candidates = [p for p in (port, remembered) if p] or [0]
    if not port:
        candidates.append(0)
    last: OSError | None = None
    for candidate in candidates:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as e:
            sock.close()
            last = e
            if candidate == port and port:
                raise
            log.warning(
                "port %s is taken; picking another (the old kubeconfig stops working)", candidate
            )
            continue
        sock.listen(512)
        sock.setblocking(False)
        return sock
    raise last or OSError("no port to bind")


async def _bootstrap(srv: Server, host: str, port: int) -> None:
    """What every cluster has: the default namespaces, and the `kubernetes` Service with
    Endpoints pointing at this server (updated when the port changes)."""
    opts = writes.WriteOptions(internal=True, field_manager="kube-apiserver")
    for name in DEFAULT_NAMESPACES:
        if srv.namespace(name) is None:
            await writes.create(
                srv,
                NAMESPACES,
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                opts,
            )
    services = srv.registry.lookup("", "v1", "services")
    endpoints = srv.registry.lookup("", "v1", "endpoints")
    assert services is not None and endpoints is not None
    labels = {"component": "apiserver", "provider": "kubernetes"}
    if srv.get(services, "default", "kubernetes") is None:
        service = {
            "metadata": {"name": "kubernetes", "labels": labels},
            "spec": {
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
            },
        }
        await writes.create(srv, services, "default", service, opts)
    subsets = [
        {
            "addresses": [{"ip": host}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }
    ]
    current = srv.get(endpoints, "default", "kubernetes")
    wanted = {"metadata": {"name": "kubernetes", "labels": labels}, "subsets": subsets}
    if current is None:
        await writes.create(srv, endpoints, "default", wanted, opts)
    elif current.get("subsets") != subsets:
        await writes.write_update(
            srv, endpoints, current, {**clone(current), "subsets": subsets}, opts
        )


async def start_apiserver(config: ApiServerConfig) -> RunningApiServer:
    data_dir = Path(config.data_dir).resolve()
    datadir.make_private_dir(data_dir)  # every Secret, the token and the keys live here
    creds = kubeconfig.load_or_create_credentials(data_dir, config.host)
    sock = _bind(config.host, config.port, kubeconfig.read_port(data_dir))
    port = sock.getsockname()[1]
    store = await Storage.open(
        data_dir / DB_FILE, history=config.event_history, history_bytes=config.event_history_bytes
    )
    host_in_url = f"[{config.host}]" if ":" in config.host else config.host
    srv = Server(
        store,
        hub=watch.Hub(max_backlog=config.watch_queue_events, max_bytes=config.watch_queue_bytes),
        server_address=f"{host_in_url}:{port}",
        bookmark_interval=config.bookmark_interval,
    )
    runner: web.AppRunner | None = None
    controllers: Controllers | None = None
    try:
        await _bootstrap(srv, config.host, port)
        controllers = Controllers(srv, event_ttl=config.event_ttl, root_ca=creds.ca_pem.decode())
        await controllers.start()
        ssl_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_ctx.load_cert_chain(creds.cert_file, creds.key_file)
        kubelet_tls = subresources.kubelet_client_tls(
            creds.kubelet_client_cert, creds.kubelet_client_key
        )
        app = create_app(
            srv, creds.token, kubelet_tls=kubelet_tls, api_token=creds.api_token or None
        )
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.SockSite(runner, sock, ssl_context=ssl_ctx).start()
    except BaseException:
        if runner is not None:
            await runner.cleanup()
        if controllers is not None:
            await controllers.stop()
        await store.close()
        with contextlib.suppress(OSError):
            sock.close()
        raise
    url = f"https://{host_in_url}:{port}"
    kubeconfig.write_port(data_dir, port)
    kc_path = data_dir / "kubeconfig"
    kubeconfig.write_kubeconfig(kc_path, url, creds)
    log.info("serving on %s (kubeconfig: %s)", url, kc_path)
    return RunningApiServer(
        url=url,
        kubeconfig=kc_path,
        ca_file=creds.ca_file,
        token=creds.token,
        data_dir=data_dir,
        server=srv,
        api_token=creds.api_token,
        _runner=runner,
        _controllers=controllers,
    )
