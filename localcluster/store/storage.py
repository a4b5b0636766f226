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
served from the log when N is not older than its start, else it is too old (410). The log is
capped by count (`history`) and by bytes (`history_bytes`, the JSON size of each event's object and
old object): whichever cap is reached first evicts the oldest events, in memory and on disk.

Listeners (`listeners`) are called synchronously after each commit. A listener that raises is
logged with its traceback and the next listener still runs: the write is committed by then, so
its caller gets its result either way.

Objects handed out are shared, never copied: callers must treat them as read-only and build new
dicts for writes (`records.clone`).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster import datadir
from localcluster.store.records import Event, Record, dumps

__all__ = [
    "Conflict",
    "Exists",
    "Missing",
    "Storage",
    "StorageError",
    "TooOld",
]

Key = tuple[str, str, str]  # (resource id "group/plural", namespace, name)

log = logging.getLogger("localcluster.storage")

DEFAULT_HISTORY = 10_000
DEFAULT_HISTORY_BYTES = 64 * 1024 * 1024

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


@dataclass
class _Op:
    kind: str  # create, update, delete
    key: Key
    obj: dict[str, Any] | None
    expect_rv: str | None
    future: asyncio.Future[dict[str, Any]] = field(init=False)


def _raw_old(event: Event) -> bytes | None:
    return dumps(event.old) if event.old is not None else None


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

    def __init__(
        self,
        path: Path,
        *,
        history: int = DEFAULT_HISTORY,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
    ) -> None:
        self.path = path
        self._history = history
        self._history_bytes = history_bytes
        self._log_bytes = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        self._conn: sqlite3.Connection | None = None
        self._pending: list[_Op] = []
        self._committer: asyncio.Task[None] | None = None
        self._objects: dict[str, dict[tuple[str, str], Record]] = collections.defaultdict(dict)
        self._sorted: dict[str, list[tuple[str, str]]] = {}  # resource → sorted keys (cache)
        self._uids: dict[str, Key] = {}
        self._owners: dict[str, set[Key]] = collections.defaultdict(set)
        self._log: collections.deque[Event] = collections.deque()
        self._log_start = 0  # every event with rv > _log_start is in _log
        self._rv = 0
        self._writes = 0
        self.listeners: list[Callable[[Event], None]] = []

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        history: int = DEFAULT_HISTORY,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
    ) -> Storage:
        store = cls(path, history=history, history_bytes=history_bytes)
        await store._run(store._open_sync)
        return store

    async def close(self) -> None:
        if self._committer is not None and not self._committer.done():
            await asyncio.wait([self._committer])

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
        # Every Secret is in here in clear: 0600, and so are the -wal and -shm SQLite adds.
        datadir.make_private_file(self.path, also=("-wal", "-shm"))
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
            event = Event(
                rv, typ, resource, ns, name, obj, json.loads(old) if old else None, data,
                len(old) if old else 0,
            )  # fmt: skip
            self._log.append(event)
            self._log_bytes += event.size
        self._log_start = self._log[0].rv - 1 if self._log else self._rv
        self._trim_log()

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
        keys = self._sorted.get(resource)
        if keys is None:
            keys = self._sorted[resource] = sorted(items)
        if namespace:
            lo = bisect.bisect_left(keys, (namespace, ""))
            hi = bisect.bisect_left(keys, (namespace + "\x00", ""))
            keys = keys[lo:hi]
        return [items[k] for k in keys]

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
    #
    # Group commit: writes queue up while a transaction is in flight; the committer checks
    # them in order against the in-memory state (plus earlier writes of the same batch),
    # commits the survivors in one transaction, then applies them and notifies listeners in
    # resourceVersion order. Each caller gets its own result or error.

    async def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self._submit(_Op("create", _key(resource, obj), obj, None))

    async def update(
        self, resource: str, obj: dict[str, Any], *, expect_rv: str | None = None
    ) -> dict[str, Any]:
        """Replace the stored object; with `expect_rv`, only if it still has that version."""
        return await self._submit(_Op("update", _key(resource, obj), obj, expect_rv))

    async def delete(
        self, resource: str, namespace: str, name: str, *, expect_rv: str | None = None
    ) -> dict[str, Any]:
        return await self._submit(_Op("delete", (resource, namespace, name), None, expect_rv))

    def _find(self, key: Key) -> Record | None:
        return self._objects.get(key[0], {}).get((key[1], key[2]))

    async def _submit(self, op: _Op) -> dict[str, Any]:
        op.future = asyncio.get_running_loop().create_future()
        self._pending.append(op)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._commit_loop())
        return await op.future

    async def _commit_loop(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                planned = self._plan(batch)
            except Exception as e:  # a bug must fail the callers, never leave them waiting
                for op in batch:
                    if not op.future.done():
                        op.future.set_exception(e)
                continue
            if not planned:
                continue
            self._writes += len(planned)
            prune = self._writes // 1000 != (self._writes - len(planned)) // 1000
            prune_upto = self._log_start  # already evicted from memory: gone from disk too
            rows = [
                (e.type, (e.resource, e.namespace, e.name), e.rv, e.raw, _raw_old(e))
                for _, e in planned
            ]
            try:
                await self._run(self._write_sync, rows, prune_upto if prune else None)
            except BaseException as e:
                for op, _ in planned:
                    if not op.future.done():
                        op.future.set_exception(
                            e if isinstance(e, Exception) else RuntimeError("storage closed")
                        )
                if not isinstance(e, Exception):
                    raise
                continue
            for op, event in planned:
                self._apply(event)
                if not op.future.done():
                    op.future.set_result(event.obj)

    def _plan(self, batch: list[_Op]) -> list[tuple[_Op, Event]]:
        """Check each write against the state it will see; failed ones get their error now."""
        overlay: dict[Key, Record | None] = {}
        planned: list[tuple[_Op, Event]] = []
        rv = self._rv
        for op in batch:
            current = overlay[op.key] if op.key in overlay else self._find(op.key)
            error: StorageError | None = None
            if op.kind == "create" and current is not None:
                error = Exists(op.key)
            elif op.kind != "create" and current is None:
                error = Missing(op.key)
            elif (
                op.expect_rv is not None
                and current is not None
                and current.obj["metadata"]["resourceVersion"] != op.expect_rv
            ):
                error = Conflict(op.key)
            if error is not None:
                if not op.future.done():
                    op.future.set_exception(error)
                continue
            old = current.obj if current is not None else None
            source = op.obj if op.obj is not None else old
            assert source is not None
            new = _with_rv(source, rv + 1)
            try:
                raw = dumps(new)
            except (TypeError, ValueError) as e:  # not JSON: refuse this write only
                if not op.future.done():
                    op.future.set_exception(e)
                continue
            rv += 1
            typ = {"create": "ADDED", "update": "MODIFIED", "delete": "DELETED"}[op.kind]
            overlay[op.key] = None if typ == "DELETED" else Record(new, raw)
            old_size = len(current.raw) if current is not None else 0
            planned.append((op, Event(rv, typ, *op.key, new, old, raw, old_size)))
        return planned

    def _apply(self, event: Event) -> None:
        key = (event.resource, event.namespace, event.name)
        self._rv = event.rv
        if event.old is not None:
            self._unindex(key, event.old)
        if event.type == "DELETED":
            if self._objects[key[0]].pop((key[1], key[2]), None) is not None:
                self._sorted.pop(key[0], None)
        else:
            self._remember(event.resource, event.obj, event.raw)
        self._log.append(event)
        self._log_bytes += event.size
        self._trim_log()
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                log.exception(
                    "storage listener %r failed on %s %s %s/%s (resourceVersion %d); "
                    "the write is committed",
                    listener,
                    event.type,
                    event.resource,
                    event.namespace,
                    event.name,
                    event.rv,
                )

    def _trim_log(self) -> None:
        """Evict the oldest events while the log holds more than `history` events or bytes."""
        while self._log and (
            len(self._log) > self._history or self._log_bytes > self._history_bytes
        ):
            evicted = self._log.popleft()
            self._log_bytes -= evicted.size
            self._log_start = evicted.rv

    def _write_sync(
        self, rows: list[tuple[str, Key, int, bytes, bytes | None]], prune_upto: int | None
    ) -> None:
        conn = self._conn
        if conn is None:
            raise RuntimeError("storage is closed")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for typ, key, rv, raw, old in rows:
                if typ == "DELETED":
                    conn.execute(
                        "DELETE FROM objects WHERE resource=? AND namespace=? AND name=?", key
                    )
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
            last = rows[-1][2]
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(last),))
            if prune_upto is not None:
                upto = max(last - self._history, prune_upto)
                conn.execute("DELETE FROM events WHERE rv <= ?", (upto,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _remember(self, resource: str, obj: dict[str, Any], raw: bytes) -> None:
        key = _key(resource, obj)
        items = self._objects[resource]
        if (key[1], key[2]) not in items:
            self._sorted.pop(resource, None)
        items[(key[1], key[2])] = Record(obj, raw)
        meta = obj["metadata"]
        if uid := meta.get("uid"):
            self._uids[uid] = key
        for ref in meta.get("ownerReferences") or ():
            if ref.get("uid"):
                self._owners[ref["uid"]].add(key)

    def _unindex(self, key: Key, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if (uid := meta.get("uid")) and self._uids.get(uid) == key:
            del self._uids[uid]
        for ref in meta.get("ownerReferences") or ():
            deps = self._owners.get(ref.get("uid", ""))
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self._owners[ref["uid"]]
