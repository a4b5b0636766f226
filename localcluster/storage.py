"""Durable object storage: SQLite (WAL) on disk, an in-memory copy for reads, an event log.

Why this shape: kube-apiserver keeps objects in etcd and serves most reads and every watch from
an in-memory "watch cache". We do the same on one machine. SQLite is the durable store; it is
touched only by one dedicated thread (one connection, one writer) so the event loop never
blocks on disk. Every successful write commits one transaction that stores the object, appends
one event and advances the global resourceVersion; only after the commit does the in-memory copy
change and the event reach subscribers, so a watcher never sees a write that could be lost.

resourceVersion is one counter over all kinds (like an etcd revision), persisted in the `meta`
table, so it keeps growing across restarts. Every commit consumes exactly one resourceVersion
and produces exactly one event, which makes the event log contiguous: a watch from version N is
served from the log when N is not older than its start, else it is too old (410).

Objects handed out are shared, never copied: callers must treat them as read-only and build new
dicts for writes (`clone`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Conflict",
    "Event",
    "Exists",
    "Missing",
    "Record",
    "Storage",
    "StorageError",
    "TooOld",
    "clone",
    "dumps",
]

Key = tuple[str, str, str]  # (resource id "group/plural", namespace, name)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    rv INTEGER PRIMARY KEY, type TEXT NOT NULL, resource TEXT NOT NULL,
    namespace TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL, old BLOB);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class StorageError(Exception):
    """Base of storage failures; `key` names the object."""

    def __init__(self, key: Key, message: str = "") -> None:
        super().__init__(message or "/".join(key))
        self.key = key


class Exists(StorageError):
    """Create of a key that is already stored."""


class Missing(StorageError):
    """Update or delete of a key that is not stored."""


class Conflict(StorageError):
    """The stored resourceVersion differs from the expected one."""


class TooOld(Exception):
    """A watch asked for events older than the retained log."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def clone(obj: Any) -> Any:
    """A deep copy of a JSON value (faster than copy.deepcopy for plain JSON)."""
    return json.loads(json.dumps(obj))


@dataclass(frozen=True)
class Record:
    obj: dict[str, Any]
    raw: bytes  # the JSON encoding of obj, reused by list responses

    @property
    def rv(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    raw: bytes


def _with_rv(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    new = dict(obj)
    meta = dict(new.get("metadata") or {})
    meta["resourceVersion"] = str(rv)
    new["metadata"] = meta
    return new


def _key(resource: str, obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (resource, meta.get("namespace") or "", meta["name"])


class Storage:
    """The object store. Open with `await Storage.open(path)`; close with `await close()`."""

    def __init__(self, path: Path, *, history: int = 10_000) -> None:
        self.path = path
        self._history = history
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._objects: dict[str, dict[tuple[str, str], Record]] = collections.defaultdict(dict)
        self._uids: dict[str, Key] = {}
        self._owners: dict[str, set[Key]] = collections.defaultdict(set)
        self._log: collections.deque[Event] = collections.deque()
        self._log_start = 0  # every event with rv > _log_start is in _log
        self._rv = 0
        self._writes = 0
        self.listeners: list[Callable[[Event], None]] = []

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path, *, history: int = 10_000) -> Storage:
        store = cls(path, history=history)
        await store._run(store._open_sync)
        return store

    async def close(self) -> None:
        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._run(_close)
        self._executor.shutdown(wait=True)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        self._conn = conn
        row = conn.execute("SELECT value FROM meta WHERE key='rv'").fetchone()
        self._rv = int(row[0]) if row else 0
        for resource, _ns, _name, data in conn.execute(
            "SELECT resource, namespace, name, data FROM objects"
        ):
            obj = json.loads(data)
            self._remember(resource, obj, bytes(data))
        events = conn.execute(
            "SELECT rv, type, resource, namespace, name, data, old FROM events ORDER BY rv"
        ).fetchall()
        for rv, typ, resource, ns, name, data, old in events[-self._history :]:
            obj = json.loads(data)
            self._log.append(
                Event(rv, typ, resource, ns, name, obj, json.loads(old) if old else None, data)
            )
        self._log_start = self._log[0].rv - 1 if self._log else self._rv

    # -- reads (memory, never block) ------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def oldest_resource_version(self) -> int:
        """Watches may start from any version >= this one."""
        return self._log_start

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        rec = self._objects.get(resource, {}).get((namespace, name))
        return rec.obj if rec else None

    def records(self, resource: str, namespace: str | None = None) -> list[Record]:
        """Records sorted by (namespace, name), optionally in one namespace."""
        items = self._objects.get(resource)
        if not items:
            return []
        if namespace:
            return [rec for (ns, _), rec in sorted(items.items()) if ns == namespace]
        return [rec for _, rec in sorted(items.items())]

    def resources(self) -> list[str]:
        return [r for r, items in self._objects.items() if items]

    def namespaced_keys(self, namespace: str) -> Iterator[Key]:
        for resource, items in self._objects.items():
            for ns, name in items:
                if ns == namespace:
                    yield (resource, ns, name)

    def by_uid(self, uid: str) -> Key | None:
        return self._uids.get(uid)

    def dependents(self, owner_uid: str) -> list[Key]:
        return sorted(self._owners.get(owner_uid, ()))

    def events_after(self, rv: int) -> list[Event]:
        """Events with resourceVersion > rv; raises TooOld when some were compacted away."""
        if rv < self._log_start:
            raise TooOld(rv, self._log_start + 1)
        if not self._log or rv >= self._log[-1].rv:
            return []
        first = self._log[0].rv
        start = max(0, rv + 1 - first)
        return list(self._log)[start:]

    # -- writes ---------------------------------------------------------------------------

    async def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        key = _key(resource, obj)
        async with self._lock:
            if self._find(key) is not None:
                raise Exists(key)
            return await self._commit("ADDED", key, obj, None)

    async def update(
        self, resource: str, obj: dict[str, Any], *, expect_rv: str | None = None
    ) -> dict[str, Any]:
        """Replace the stored object; with `expect_rv`, only if it still has that version."""
        key = _key(resource, obj)
        async with self._lock:
            old = self._find(key)
            if old is None:
                raise Missing(key)
            if expect_rv is not None and old.obj["metadata"]["resourceVersion"] != expect_rv:
                raise Conflict(key)
            return await self._commit("MODIFIED", key, obj, old.obj)

    async def delete(
        self, resource: str, namespace: str, name: str, *, expect_rv: str | None = None
    ) -> dict[str, Any]:
        key = (resource, namespace, name)
        async with self._lock:
            old = self._find(key)
            if old is None:
                raise Missing(key)
            if expect_rv is not None and old.obj["metadata"]["resourceVersion"] != expect_rv:
                raise Conflict(key)
            return await self._commit("DELETED", key, old.obj, old.obj)

    def _find(self, key: Key) -> Record | None:
        return self._objects.get(key[0], {}).get((key[1], key[2]))

    async def _commit(
        self, typ: str, key: Key, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> dict[str, Any]:
        rv = self._rv + 1
        new = _with_rv(obj, rv)
        raw = dumps(new)
        old_raw = dumps(old) if old is not None else None
        self._writes += 1
        prune = self._writes % 1000 == 0
        await self._run(self._write_sync, typ, key, rv, raw, old_raw, prune)
        self._rv = rv
        if typ == "DELETED":
            self._forget(key, old or new)
        else:
            if old is not None:
                self._forget(key, old)
            self._remember(key[0], new, raw)
        event = Event(rv, typ, key[0], key[1], key[2], new, old, raw)
        self._log.append(event)
        while len(self._log) > self._history:
            self._log_start = self._log.popleft().rv
        for listener in self.listeners:
            listener(event)
        return new

    def _write_sync(
        self, typ: str, key: Key, rv: int, raw: bytes, old: bytes | None, prune: bool
    ) -> None:
        conn = self._conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            if typ == "DELETED":
                conn.execute("DELETE FROM objects WHERE resource=? AND namespace=? AND name=?", key)
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO objects (resource, namespace, name, rv, data) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*key, rv, raw),
                )
            conn.execute(
                "INSERT INTO events (rv, type, resource, namespace, name, data, old) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (rv, typ, *key, raw, old),
            )
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(rv),))
            if prune:
                conn.execute("DELETE FROM events WHERE rv <= ?", (rv - self._history,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _remember(self, resource: str, obj: dict[str, Any], raw: bytes) -> None:
        key = _key(resource, obj)
        self._objects[resource][(key[1], key[2])] = Record(obj, raw)
        meta = obj["metadata"]
        if uid := meta.get("uid"):
            self._uids[uid] = key
        for ref in meta.get("ownerReferences") or ():
            if ref.get("uid"):
                self._owners[ref["uid"]].add(key)

    def _forget(self, key: Key, obj: dict[str, Any]) -> None:
        self._objects[key[0]].pop((key[1], key[2]), None)
        meta = obj["metadata"]
        if (uid := meta.get("uid")) and self._uids.get(uid) == key:
            del self._uids[uid]
        for ref in meta.get("ownerReferences") or ():
            deps = self._owners.get(ref.get("uid", ""))
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self._owners[ref["uid"]]
