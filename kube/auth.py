"""Credentials at work: load a `kube.config.Config` from files or a pod, and keep it current.

The I/O side of `kube.config` (which decides what a kubeconfig means): reading the kubeconfig
files and the files they name, the TLS context, and the credentials that change while a
process runs —

- a token file (`tokenFile`, a pod's ServiceAccount token: bound tokens rotate) is read again
  when a minute has passed since the last read, as client-go does, and at once after a 401;
- an exec plugin's credential is kept until its `expirationTimestamp` (renewed
  `EXEC_RENEW_SECONDS` before) and renewed after a 401 answered to it; the plugin runs with its
  `env`, `$KUBERNETES_EXEC_INFO`, no terminal (stdin closed; `interactiveMode: Always` is
  refused), within `EXEC_TIMEOUT` seconds. A client certificate it returns makes a new TLS
  context, so new connections present it.

`load` and `Auth.prepare` raise `ConfigError` (one line naming the file and field); after
start, a credential that cannot be renewed surfaces in `kube.transport` as `Unavailable`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kube.config import (
    IN_CLUSTER_DIR,
    Config,
    ConfigError,
    in_cluster,
    kubeconfig_paths,
    merge,
    parse_kubeconfig,
    resolve,
)
from kube.execplugin import ExecCredential, exec_info, parse_exec_credential

__all__ = ["EXEC_RENEW_SECONDS", "EXEC_TIMEOUT", "TOKEN_FILE_SECONDS", "Auth", "load"]

TOKEN_FILE_SECONDS = 60.0
"""A token file is read again when this long has passed since its last read."""
EXEC_TIMEOUT = 60.0
"""Seconds an exec credential plugin may take."""
EXEC_RENEW_SECONDS = 10.0
"""An exec credential is renewed this long before its expirationTimestamp."""


def load(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    in_cluster_dir: str = IN_CLUSTER_DIR,
) -> Config:
    """The Config a command uses: in-cluster when `kubeconfig` is None and
    KUBERNETES_SERVICE_HOST is set (a pod), else the kubeconfig (`kubeconfig`, or the merged
    `$KUBECONFIG` files, or ~/.kube/config) at `context` (default: its current context)."""
    env = os.environ if env is None else env
    if kubeconfig is None and env.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster(env, in_cluster_dir)
    explicit = os.fspath(kubeconfig) if kubeconfig is not None else None
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    home = env.get("HOME") or str(Path.home())
    candidates = [*listed, os.path.join(home, ".kube", "config")]
    existing = [p for p in candidates if os.path.isfile(p)]
    paths = kubeconfig_paths(explicit, env.get("KUBECONFIG"), home, existing)
    if not paths:
        where = "$KUBECONFIG" if env.get("KUBECONFIG") else os.path.join(home, ".kube", "config")
        raise ConfigError(where, "", "no kubeconfig file found (and not in a pod)")
    docs = []
    for path in paths:
        try:
            text = Path(path).read_bytes()
        except OSError as e:
            raise ConfigError(path, "", e.strerror or str(e)) from None
        docs.append((path, parse_kubeconfig(text, path)))
    return resolve(merge(docs), context)


class Auth:
    """The current credentials of one Config: TLS context and Authorization header."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._token: str | None = config.token
        self._token_read = -1e18 if config.token_file else time.monotonic()
        self._exec: ExecCredential | None = None
        self._exec_lock = asyncio.Lock()
        self._ssl: ssl.SSLContext | None = None
        self._ca_pem: bytes | None = None
        self._basic: str | None = None
        if config.username is not None or config.password is not None:
            pair = f"{config.username or ''}:{config.password or ''}".encode()
            self._basic = "Basic " + base64.b64encode(pair).decode()
        if config.server.startswith("https://"):
            self._ssl = self._tls_context(None)

    # -- what the transport asks -------------------------------------------------------------

    @property
    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context of the next request (True: aiohttp's default, for http://)."""
        return self._ssl if self._ssl is not None else True

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the CA the server's certificate is checked against, None for the
        system's (or none, with insecure-skip-tls-verify)."""
        return self._ca_pem

    @property
    def bearer_token(self) -> str | None:
        """The bearer token sent now (a kubeconfig's, a token file's, an exec plugin's)."""
        if self._exec is not None and self._exec.token:
            return self._exec.token
        return self._current_token()

    @property
    def refreshable(self) -> bool:
        """Whether a 401 may be cured by reading or running something again."""
        return bool(self.config.token_file or self.config.exec)

    async def prepare(self) -> None:
        """Obtain what the first request needs (read the token file, run the exec plugin):
        a broken setup is then a ConfigError at start."""
        if self.config.token_file:
            self._read_token_file(strict=not self.config.token)
        if self.config.exec is not None:
            await self._renew_exec(None)

    async def authorization(self) -> str | None:
        """The Authorization header value for the next request (None: none)."""
        if self.config.exec is not None:
            cred = self._exec
            if cred is None or _expiring(cred):
                cred = await self._renew_exec(cred)
            if cred.token:
                return f"Bearer {cred.token}"
        token = self._current_token()
        if token:
            return f"Bearer {token}"
        return self._basic

    async def unauthorized(self, sent: str | None) -> bool:
        """A request with Authorization `sent` was answered 401: renew what may have changed;
        True when a retry may succeed (a different credential is now current)."""
        if self.config.exec is not None:
            before = self._exec
            cred = await self._renew_exec(before)
            return cred is not before and (
                cred.token != (before.token if before else None) or cred.client_cert is not None
            )
        if self.config.token_file:
            self._read_token_file(strict=False)
            token = self._current_token()
            return bool(token) and f"Bearer {token}" != sent
        return False

    # -- tokens ------------------------------------------------------------------------------

    def _current_token(self) -> str | None:
        if self.config.token_file and time.monotonic() - self._token_read >= TOKEN_FILE_SECONDS:
            self._read_token_file(strict=False)
        return self._token

    def _read_token_file(self, *, strict: bool) -> None:
        """Read the token file; a failed read keeps the last token (client-go's way), unless
        `strict` (at start, with no token to fall back on)."""
        path = self.config.token_file
        assert path is not None
        self._token_read = time.monotonic()
        try:
            token = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as e:
            if strict:
                reason = getattr(e, "strerror", None) or str(e)
                raise ConfigError(
                    self.config.source, self.config.where("token_file"), f"{path}: {reason}"
                ) from None
            return
        if token:
            self._token = token
        elif strict:
            raise ConfigError(
                self.config.source, self.config.where("token_file"), f"{path} is empty"
            )

    async def _renew_exec(self, seen: ExecCredential | None) -> ExecCredential:
        """Run the plugin, unless another task renewed the credential since `seen` was read."""
        async with self._exec_lock:
            if self._exec is not None and self._exec is not seen and not _expiring(self._exec):
                return self._exec
            cred = await self._run_exec()
            if cred.client_cert is not None:
                self._ssl = self._tls_context(cred)
            self._exec = cred
            return cred

    async def _run_exec(self) -> ExecCredential:
        import json

        cfg = self.config
        plugin = cfg.exec
        assert plugin is not None
        field = cfg.where("exec")
        if plugin.interactive_mode == "Always":
            raise ConfigError(
                cfg.source,
                f"{field}.interactiveMode",
                "Always needs a terminal; this runs without one",
            )
        env = dict(os.environ)
        env.update(plugin.env)
        env["KUBERNETES_EXEC_INFO"] = json.dumps(exec_info(cfg, interactive=False))
        try:
            proc = await asyncio.create_subprocess_exec(
                plugin.command,
                *plugin.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            hint = f" ({' '.join(plugin.install_hint.split())})" if plugin.install_hint else ""
            reason = e.strerror or str(e)
            raise ConfigError(
                cfg.source, f"{field}.command", f"{plugin.command}: {reason}{hint}"
            ) from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), EXEC_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ConfigError(
                cfg.source,
                f"{field}.command",
                f"{plugin.command} did not finish within {EXEC_TIMEOUT:g}s",
            ) from None
        if proc.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            said = f": {lines[-1].strip()}" if lines else ""
            raise ConfigError(
                cfg.source,
                f"{field}.command",
                f"{plugin.command} exited with {proc.returncode}{said}",
            )
        return parse_exec_credential(out, plugin, cfg.source)

    # -- TLS ---------------------------------------------------------------------------------

    def _tls_context(self, cred: ExecCredential | None) -> ssl.SSLContext:
        cfg = self.config
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if cfg.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif cfg.ca_data or cfg.ca_file:
            pem = cfg.ca_data or self._read(cfg.ca_file, "ca")
            try:
                ctx.load_verify_locations(cadata=pem.decode("ascii", errors="replace"))
            except (ssl.SSLError, ValueError) as e:
                raise ConfigError(
                    cfg.source, cfg.where("ca"), f"not a PEM certificate ({_ssl_reason(e)})"
                ) from None
            self._ca_pem = pem
        else:
            ctx.load_default_certs()
        if cred is not None and cred.client_cert and cred.client_key:
            self._load_pair(ctx, cred.client_cert, cred.client_key, "exec")
        elif cfg.client_cert_data or cfg.client_cert_file:
            cert = cfg.client_cert_data or self._read(cfg.client_cert_file, "client_cert")
            key = cfg.client_key_data or self._read(cfg.client_key_file, "client_key")
            self._load_pair(ctx, cert, key, "client_cert")
        return ctx

    def _read(self, path: str | None, setting: str) -> bytes:
        assert path is not None
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise ConfigError(
                self.config.source, self.config.where(setting), f"{path}: {e.strerror or e}"
            ) from None

    def _load_pair(self, ctx: ssl.SSLContext, cert: bytes, key: bytes, setting: str) -> None:
        """`load_cert_chain` takes files only: the pair goes through a private temporary
        directory, removed at once."""
        with tempfile.TemporaryDirectory(prefix="trainops-client-") as tmp:
            cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            cert_path.write_bytes(cert)
            try:
                ctx.load_cert_chain(cert_path, key_path)
            except (ssl.SSLError, ValueError) as e:
                raise ConfigError(
                    self.config.source,
                    self.config.where(setting),
                    f"client certificate and key unusable ({_ssl_reason(e)})",
                ) from None


def _in_cluster(env: Mapping[str, str], directory: str) -> Config:
    def read(name: str) -> str | None:
        try:
            return Path(directory, name).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    return in_cluster(
        env,
        token=read("token"),
        namespace=read("namespace"),
        ca_present=os.path.isfile(os.path.join(directory, "ca.crt")),
        directory=directory,
    )


def _expiring(cred: ExecCredential) -> bool:
    if cred.expiry is None:
        return False
    return datetime.now(UTC) >= cred.expiry - timedelta(seconds=EXEC_RENEW_SECONDS)


def _ssl_reason(e: Exception) -> str:
    if isinstance(e, ssl.SSLError):
        return str(e.reason or e)
    return str(e)
