"""TLS for the webhook: one listening context, certificates swapped in without a restart.

A Secret mounted as a volume is updated by the kubelet in place (a symlink swap), and the
in-cluster certificate manager rewrites the files itself; in both cases the listening socket must
keep running. The server listens with one fixed *front* `SSLContext` whose `sni_callback` runs
on every ClientHello (with or without SNI) and hands the handshake over to the *current*
context. Reloading builds a complete new context off the event loop and then replaces one
reference, so a handshake sees either the whole old pair or the whole new pair. Connections
already open keep the pair they were set up with; new connections get the new one.

The watcher polls `tls.crt` and `tls.key` (stat, then content) every `interval` seconds in a
worker thread. A half-written pair (a certificate whose key has not arrived yet) fails to load
and is retried on the next tick while the old pair keeps serving.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography import x509

__all__ = ["LoadedPair", "ReloadingTLS", "server_context"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedPair:
    """What is being served: the context, and the certificate's identity for logs and metrics."""

    context: ssl.SSLContext
    serial: int
    not_after: datetime
    digest: str


def server_context() -> ssl.SSLContext:
    """A server context with TLS >= 1.2 and HTTP/1.1 only (what the API server speaks)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class ReloadingTLS:
    """The front context plus a background watcher that swaps in changed certificate files."""

    def __init__(self, cert_file: Path, key_file: Path, *, interval: float = 1.0) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self._stamp = self._stat()
        self.current = self._load()
        self.context = server_context()
        # The front context needs a certificate of its own for clients that never reach the
        # callback (there are none in practice, but OpenSSL requires one to start a handshake).
        self.context.load_cert_chain(self.cert_file, self.key_file)
        self.context.sni_callback = self._select

    @property
    def serial(self) -> int:
        return self.current.serial

    @property
    def not_after(self) -> datetime:
        return self.current.not_after

    def _select(self, sslobj: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: object) -> None:
        sslobj.context = self.current.context
        return None

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        out = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _load(self) -> LoadedPair:
        """Build a context from the files as they are now; raises on an unusable pair."""
        cert_pem = self.cert_file.read_bytes()
        key_pem = self.key_file.read_bytes()
        ctx = server_context()
        ctx.load_cert_chain(self.cert_file, self.key_file)
        # The files may have changed between reading and loading: only accept a stable pair.
        if self.cert_file.read_bytes() != cert_pem or self.key_file.read_bytes() != key_pem:
            raise ValueError("certificate files changed while loading")
        cert = x509.load_pem_x509_certificate(cert_pem)
        digest = hashlib.sha256(cert_pem + key_pem).hexdigest()
        return LoadedPair(ctx, cert.serial_number, cert.not_valid_after_utc, digest)

    def check(self) -> bool:
        """Reload if the files changed (blocking: call from a thread). True when swapped."""
        try:
            stamp = self._stat()
        except OSError as exc:
            log.warning("cannot stat certificate files: %s", exc)
            return False
        if stamp == self._stamp:
            return False
        try:
            loaded = self._load()
        except (OSError, ValueError, ssl.SSLError) as exc:
            log.warning("certificate files changed but do not load yet (%s); will retry", exc)
            return False
        self._stamp = stamp
        if loaded.digest == self.current.digest:
            return False
        old = self.current.serial
        self.current = loaded
        log.info("serving certificate reloaded: serial %x -> %x", old, loaded.serial)
        return True

    async def watch(self) -> None:
        """Poll for changes until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await asyncio.to_thread(self.check)
            except Exception:  # keep watching: the current pair keeps serving meanwhile
                log.exception("certificate reload check failed")
