"""Build and run a real Kubernetes control plane on loopback, as the reference for trainops.

`build` compiles kube-apiserver and kube-controller-manager (the Kubernetes version the embedded
server reports) and etcd from the Go module proxy, through the small module in hack/reference/,
into a cache outside the repository; a second build with the same go.mod, go.sum, flags and Go
toolchain does nothing. A build holds a lock on the cache (`.build.lock`), so a second build
started meanwhile waits, saying so, and then finds the binaries built.

`start DIR` makes a CA, a serving certificate, the client certificate kube-apiserver presents
to kubelets (`--kubelet-client-certificate`) and service-account keys in DIR, starts etcd,
kube-apiserver and kube-controller-manager on loopback ports with their logs in DIR/*.log,
writes an admin DIR/kubeconfig (static token, group system:masters), prints one line once the
API server is ready and the controllers work, and stops everything on SIGTERM or Ctrl-C.

Run it through `hack/reference-cluster` (it picks the project's virtual environment).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import fcntl
import hashlib
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certs import pki  # noqa: E402  (the repository root is put on sys.path just above)

VERSION = "v1.32.13"
MODULE_DIR = ROOT / "hack" / "reference"
TARGETS = {
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
}
# kubectl and client-go parse the version the server reports; without these it says v0.0.0.
_MAJOR, _MINOR = VERSION.lstrip("v").split(".")[:2]
LDFLAGS = " ".join(
    f"-X k8s.io/component-base/version.{key}={value}"
    for key, value in (
        ("gitVersion", VERSION),
        ("gitMajor", _MAJOR),
        ("gitMinor", _MINOR),
        ("gitTreeState", "clean"),
    )
)
BUILD_FLAGS = ("-trimpath", "-ldflags", LDFLAGS)
BUILD_ENV = {"CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}

CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "replicaset-controller",
    "deployment-controller",
    # Fills a ResourceQuota's status (hard, used) and recomputes `used` when objects go away:
    # without it the ResourceQuota admission plugin has no usage to check against and admits
    # everything (tests/controller/test_refused_creates.py needs a quota that refuses).
    "resourcequota-controller",
    # Publishes kube-root-ca.crt in every namespace: a real kubelet mounts it into each pod's
    # service-account token volume, and our process kubelet waits for it as one does.
    "root-ca-certificate-publisher-controller",
)
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
LOCK_FILE = ".build.lock"
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0


class Failure(Exception):
    """A problem to report on one line, without a traceback."""


# --- build -----------------------------------------------------------------------------------


def cache_dir() -> Path:
    configured = os.environ.get("TRAINOPS_REFERENCE_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "trainops" / "reference" / VERSION


def bin_dir() -> Path:
    """Where `start` finds the binaries: TRAINOPS_REFERENCE_BIN, else the build cache."""
    configured = os.environ.get("TRAINOPS_REFERENCE_BIN")
    return Path(configured).expanduser() if configured else cache_dir()


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise Failure("`go` is not on PATH: install Go (>= 1.23) to build the reference cluster")
    return go


def build_stamp(go_version: str) -> str:
    """What the binaries depend on: the module (go.mod, go.sum, the etcd entry point, the
    stubs), the flags and the Go toolchain."""
    digest = hashlib.sha256()
    for path in sorted(p for p in MODULE_DIR.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(MODULE_DIR)).encode() + b"\0" + path.read_bytes())
    for part in (*BUILD_FLAGS, *sorted(f"{k}={v}" for k, v in BUILD_ENV.items()), go_version):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def build_lock(out: Path, say: Callable[[str], None] = print) -> Iterator[None]:
    """Hold an exclusive lock on `out`'s lock file (fcntl.flock: released by the kernel if
    this process dies); when another build holds it, say so and wait for it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    with open(path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another build of the reference binaries is running (lock {path}); waiting for it")
            t0 = time.monotonic()
            # No timeout: the other build's compile has none either (see build()).
            fcntl.flock(lock, fcntl.LOCK_EX)
            say(f"the other build finished after {time.monotonic() - t0:.1f}s")
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(force: bool = False) -> None:
    go = _go()
    go_version = subprocess.run(
        [go, "version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    out = cache_dir()
    stamp = build_stamp(go_version)
    with build_lock(out, lambda line: print(line, flush=True)):
        # Checked under the lock: a build that was running when this one started has just
        # written the stamp (unless it failed, when this one builds).
        if not force and _up_to_date(out, stamp):
            print(f"reference binaries {VERSION} up to date in {out} (nothing to build)")
            return
        _compile(go, out, stamp)


def _up_to_date(out: Path, stamp: str) -> bool:
    stamp_file = out / ".stamp"
    present = all((out / name).is_file() for name in TARGETS)
    return present and stamp_file.is_file() and stamp_file.read_text() == stamp


def _compile(go: str, out: Path, stamp: str) -> None:
    stamp_file = out / ".stamp"
    stamp_file.unlink(missing_ok=True)
    env = {**os.environ, **BUILD_ENV}
    started = time.monotonic()
    for name, package in TARGETS.items():
        t0 = time.monotonic()
        print(f"building {name} ({package}) ...", flush=True)
        tmp = out / f".{name}.tmp"
        cmd = [go, "build", *BUILD_FLAGS, "-o", str(tmp), package]
        # Compiling Kubernetes takes minutes; no timeout beyond CI's own.
        result = subprocess.run(cmd, cwd=MODULE_DIR, env=env, check=False)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise Failure(f"go build of {name} failed (exit {result.returncode}), see above")
        tmp.replace(out / name)
        print(f"built {name} in {time.monotonic() - t0:.1f}s", flush=True)
    stamp_file.write_text(stamp)
    print(f"built reference binaries {VERSION} into {out} in {time.monotonic() - started:.1f}s")


# --- start: files ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pick_ports(apiserver: int | None) -> Ports:
    chosen: set[int] = {apiserver} if apiserver else set()
    picked: list[int] = []
    while len(picked) < 2 + (0 if apiserver else 1):
        port = free_port()
        if port not in chosen:
            chosen.add(port)
            picked.append(port)
    return Ports(picked[0], picked[1], apiserver or picked[2])


def _write_new(path: Path, data: bytes, mode: int = 0o644) -> None:
    if not path.exists():
        pki.atomic_write(path, data, mode)


def write_credentials(d: Path) -> tuple[str, str]:
    """CA, serving certificate, kubelet client certificate, service-account key pair and static
    tokens in `d`, kept across restarts of the same directory (tokens already issued stay
    valid). Returns the admin and controller-manager tokens."""
    if not (d / "ca.crt").exists() or not (d / "ca.key").exists():
        ca = pki.new_ca("trainops-reference-ca")
        pki.atomic_write(d / "ca.key", ca.key_pem, 0o600)
        pki.atomic_write(d / "ca.crt", ca.cert_pem)
    ca = pki.load_keypair(d / "ca.crt", d / "ca.key")
    if not (d / "apiserver.crt").exists() or not (d / "apiserver.key").exists():
        sans = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            SERVICE_IP,
        ]
        serving = pki.new_serving_cert(ca, sans, common_name="kube-apiserver")
        pki.atomic_write(d / "apiserver.key", serving.key_pem, 0o600)
        pki.atomic_write(d / "apiserver.crt", serving.cert_pem)
    if not (d / "kubelet-client.crt").exists() or not (d / "kubelet-client.key").exists():
        # What kube-apiserver presents to kubelets (logs): signed by the cluster CA, which a
        # process kubelet joined through the kubeconfig trusts for clients (as on kubeadm).
        client = pki.new_client_cert(
            ca, "kube-apiserver-kubelet-client", organizations=("system:masters",)
        )
        pki.atomic_write(d / "kubelet-client.key", client.key_pem, 0o600)
        pki.atomic_write(d / "kubelet-client.crt", client.cert_pem)
    if not (d / "sa.key").exists():
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        pub = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        pki.atomic_write(d / "sa.key", pem, 0o600)
        pki.atomic_write(d / "sa.pub", pub)
    tokens = d / "tokens.csv"
    if not tokens.exists():
        admin, kcm = secrets.token_hex(24), secrets.token_hex(24)
        lines = [
            f'{admin},admin,admin-uid,"system:masters"',
            f"{kcm},system:kube-controller-manager,kcm-uid",
        ]
        pki.atomic_write(tokens, ("\n".join(lines) + "\n").encode(), 0o600)
    rows = [line.split(",") for line in tokens.read_text().splitlines() if line]
    by_user = {row[1]: row[0] for row in rows}
    return by_user["admin"], by_user["system:kube-controller-manager"]


def kubeconfig(server: str, ca_pem: bytes, token: str, user: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "reference",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "reference", "context": {"cluster": "reference", "user": user}}],
        "current-context": "reference",
    }


def commands(binaries: Path, d: Path, ports: Ports) -> dict[str, list[str]]:
    """The three components' command lines, in start order."""
    etcd_client = f"http://127.0.0.1:{ports.etcd_client}"
    etcd_peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return {
        "etcd": [
            str(binaries / "etcd"),
            "--name=reference",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_client}",
            f"--advertise-client-urls={etcd_client}",
            f"--listen-peer-urls={etcd_peer}",
            f"--initial-advertise-peer-urls={etcd_peer}",
            f"--initial-cluster=reference={etcd_peer}",
            "--log-level=warn",
            # A throwaway test cluster: skipping fsync keeps writes fast on a shared disk.
            "--unsafe-no-fsync=true",
        ],
        "kube-apiserver": [
            str(binaries / "kube-apiserver"),
            f"--etcd-servers={etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The `kubernetes` Service's Endpoints cannot hold a loopback address.
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--kubelet-client-certificate={d / 'kubelet-client.crt'}",
            f"--kubelet-client-key={d / 'kubelet-client.key'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            # Beside the defaults: the plugin OpenShift and hardened clusters enable, so the
            # controller's `<jobs>/finalizers` grant (blockOwnerDeletion) is proven too.
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--cert-dir={d / 'apiserver-certs'}",
        ],
        "kube-controller-manager": [
            str(binaries / "kube-controller-manager"),
            f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
        ],
    }


# --- start: processes ------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: die if this script dies without stopping it (e.g. SIGKILL). SIGKILL, not
    SIGTERM: kube-apiserver's graceful shutdown hangs when etcd goes away at the same moment."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ControlPlane:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def spawn(self, name: str, argv: Sequence[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115  (closed in stop())
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches this script only, which stops in order
            preexec_fn=_die_with_parent,
        )

    def exited(self) -> tuple[str, int] | None:
        for name, proc in self.procs.items():
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def stop(self) -> None:
        """SIGTERM in reverse start order, SIGKILL what is still running after a deadline."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=STOP_TIMEOUT)
        for log in self._logs:
            log.close()


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def probe(url: str, token: str, ca_file: Path) -> int | None:
    """The HTTP status of GET `url`, or None when nothing answers."""
    context = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError):
        return None


def start(d: Path, port: int | None) -> int:
    binaries = bin_dir()
    missing = [name for name in TARGETS if not (binaries / name).is_file()]
    if missing:
        raise Failure(
            f"{', '.join(missing)} not found in {binaries}: run `hack/reference-cluster build` first"
        )
    d = d.resolve()
    d.mkdir(parents=True, exist_ok=True)
    admin_token, kcm_token = write_credentials(d)
    ports = pick_ports(port)
    server = f"https://127.0.0.1:{ports.apiserver}"
    ca_pem = (d / "ca.crt").read_bytes()
    for path, token, user in (
        (d / "kubeconfig", admin_token, "admin"),
        (d / "controller-manager.kubeconfig", kcm_token, "system:kube-controller-manager"),
    ):
        text = yaml.safe_dump(kubeconfig(server, ca_pem, token, user), sort_keys=False)
        pki.atomic_write(path, text.encode(), 0o600)

    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    plane = ControlPlane(d)
    try:
        for name, argv in commands(binaries, d, ports).items():
            plane.spawn(name, argv)
        deadline = time.monotonic() + READY_TIMEOUT
        # Ready = /readyz answers 200 and the controller manager has made the default namespace's
        # ServiceAccount (so the controllers are running, and pods can be admitted).
        checks = [f"{server}/readyz", f"{server}/api/v1/namespaces/default/serviceaccounts/default"]
        while checks:
            if stop_requested.is_set():
                return 0
            dead = plane.exited()
            if dead:
                name, code = dead
                raise Failure(
                    f"{name} exited with {code} before the cluster was ready; "
                    f"last lines of {d / (name + '.log')}:\n{log_tail(d / (name + '.log'))}"
                )
            if probe(checks[0], admin_token, d / "ca.crt") == 200:
                checks.pop(0)
                continue
            if time.monotonic() > deadline:
                raise Failure(f"not ready within {READY_TIMEOUT:.0f}s; logs in {d}/*.log")
            stop_requested.wait(0.2)
        print(f"reference cluster ready: {server} (kubeconfig {d / 'kubeconfig'})", flush=True)
        while not stop_requested.wait(0.5):
            dead = plane.exited()
            if dead:
                name, code = dead
                raise Failure(
                    f"{name} exited with {code}; last lines of {d / (name + '.log')}:\n"
                    f"{log_tail(d / (name + '.log'))}"
                )
        return 0
    finally:
        plane.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hack/reference-cluster", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser(
        "build", help=f"build etcd, kube-apiserver, kube-controller-manager {VERSION}"
    )
    b.add_argument("--force", action="store_true", help="rebuild even if up to date")
    s = sub.add_parser("start", help="run the control plane with its files in DIR until stopped")
    s.add_argument("dir", type=Path, metavar="DIR")
    s.add_argument("--port", type=int, help="kube-apiserver's loopback port (default: a free one)")
    sub.add_parser("bin-dir", help="print where `start` looks for the binaries")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(force=args.force)
            return 0
        if args.command == "bin-dir":
            print(bin_dir())
            return 0
        return start(args.dir, args.port)
    except Failure as e:
        print(f"reference-cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
