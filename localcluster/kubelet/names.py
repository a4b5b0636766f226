"""Keeping every pod's hosts file current: the node's stand-in for cluster DNS (shell).

`ServiceNames` watches the Services of every namespace and, whenever a Service or one of the
node's pods (its address, its readiness) changes, recomputes each pod's hosts file with the pure
`hostsfile` and rewrites the ones that differ. A file is rewritten *in place* (same inode): it
is bind-mounted on /etc/hosts in the containers, and a rename would leave them with the old
one. The resolver reads /etc/hosts on every lookup, so a new endpoint is visible at once.
Rewrites are coalesced (one pass after a burst of changes) and run in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube import resources
from localcluster.client.kube import Kube
from localcluster.kubelet import hostsfile

__all__ = ["PodNames", "ServiceNames", "write_in_place"]

log = logging.getLogger("trainops.kubelet")

COALESCE_SECONDS = 0.05


@dataclass(frozen=True)
class PodNames:
    """One pod as the hosts files need it: the pod, its address, readiness, its file."""

    pod: dict[str, Any]
    ip: str
    ready: bool
    hosts_path: Path | None  # None: the pod has no hosts file of its own (host network)


class ServiceNames:
    def __init__(self, kube: Kube, pods: Callable[[], list[PodNames]]) -> None:
        self.kube = kube
        self.pods = pods
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._written: dict[Path, str] = {}

    async def run(self) -> None:
        """Watch Services and rewrite hosts files on changes (until cancelled)."""
        writer = asyncio.create_task(self._writer(), name="kubelet-hosts")
        try:
            await self._watch()
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    def changed(self) -> None:
        """Something DNS depends on changed: rewrite what differs soon."""
        self._dirty.set()

    def records(self) -> list[tuple[str, str, str]]:
        """The Service records of the node's pods now (computed once per rewrite pass)."""
        everyone = [hostsfile.endpoint_of(p.pod, p.ip, p.ready) for p in self.pods()]
        return hostsfile.service_records(self.services.values(), everyone)

    def content(self, me: PodNames, records: list[tuple[str, str, str]]) -> str:
        return hostsfile.hosts_file(
            hostsfile.endpoint_of(me.pod, me.ip, me.ready),
            records,
            host_aliases=(me.pod.get("spec") or {}).get("hostAliases") or [],
        )

    async def write(self, me: PodNames) -> None:
        """Write one pod's hosts file now (before its first container starts)."""
        if me.hosts_path is not None:
            text = self.content(me, self.records())
            await asyncio.to_thread(write_in_place, me.hosts_path, text)
            self._written[me.hosts_path] = text

    def forget(self, path: Path) -> None:
        self._written.pop(path, None)

    async def _writer(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(COALESCE_SECONDS)
            self._dirty.clear()
            pods = self.pods()
            records = self.records()
            for me in pods:
                if me.hosts_path is None or me.hosts_path not in self._written:
                    continue  # not prepared yet, or already gone: `write` makes the first one
                text = self.content(me, records)
                if self._written.get(me.hosts_path) != text:
                    try:
                        await asyncio.to_thread(write_in_place, me.hosts_path, text)
                    except OSError as e:
                        log.debug("hosts file %s not written: %s", me.hosts_path, e)
                        continue
                    self._written[me.hosts_path] = text

    async def _watch(self) -> None:
        while True:
            try:
                items, rv = await self.kube.list_all(resources.SERVICES)
                self.services = {_key(s): s for s in items}
                self.changed()
                async for kind, obj in self.kube.watch(resources.SERVICES, rv):
                    if kind == "DELETED":
                        self.services.pop(_key(obj), None)
                    elif kind in ("ADDED", "MODIFIED"):
                        self.services[_key(obj)] = obj
                    else:
                        continue
                    self.changed()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the server restarted, a 410 Gone: list again
                log.debug("service watch ended: %s", e)
                await asyncio.sleep(0.5)


def write_in_place(path: Path, text: str) -> None:
    """Replace the file's content keeping its inode (it is bind-mounted into containers)."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], done)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")
