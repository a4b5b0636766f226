"""A watched, indexed in-memory cache of one resource type, shaped like client-go's informer.

Controllers read from the cache (never list the API server per reconcile) and react to its
changes. `run()` lists (paginated), replaces the cache and tells the handlers the differences,
then watches from the list's resourceVersion with bookmarks, so every change after the list is
seen exactly once. A watch that the server ends normally is resumed from the last
resourceVersion seen (bookmarks keep it fresh); 410 Gone (that version is no longer in the
server's history) or any failure relists, which again reports only the differences — so a
handler sees every object that was added, changed or deleted while the watch was down. Failures
are retried with a capped exponential back-off and logged at WARNING; a handler that raises is
logged with its traceback and does not stop the informer.

`metadata_only`: the cache holds only each object's metadata (LIST and WATCH ask the server
for `PartialObjectMetadata`, client-go's metadata informer): name, labels, annotations,
resourceVersion — what tells whether an object exists and changed, at a fraction of its size.
Each is kept as `{apiVersion, kind, metadata}` of the resource (`as_metadata`), managedFields
dropped, also when a server answers with whole objects.

`transform`, when given, turns each object on arrival (listed or watched) into what is cached
and handed to the handlers — client-go's `SetTransform`, e.g. `strip_managed_fields` for a
cache whose readers never look at them (a pod's are a third of its JSON).

Handlers are `fn(event_type, obj, old)`, sync or async, called in order for every change:
ADDED (old None), MODIFIED (old is the previous cached object), DELETED (obj is the last state
seen, old the cached one).
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kube.client import Client
from kube.errors import Gone
from kube.resources import Resource, key_of

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "Handler",
    "IndexFunc",
    "Informer",
    "Transform",
    "as_metadata",
    "callable_name",
    "strip_managed_fields",
    "unsynced",
    "wait_synced",
]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], Awaitable[None] | None]
IndexFunc = Callable[[dict[str, Any]], Iterable[str]]
Transform = Callable[[dict[str, Any]], dict[str, Any]]

_log = logging.getLogger(__name__)


class Informer:
    """The cache of `resource` objects (in `namespace`, or all), kept up to date by `run()`."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        name: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        initial_backoff: float = 0.2,
        max_backoff: float = 30.0,
        logger: logging.Logger | None = None,
        transform: Transform | None = None,
        metadata_only: bool = False,
    ) -> None:
        self.client = client
        self.metadata_only = metadata_only
        if metadata_only:
            transform = _then(lambda obj: as_metadata(obj, resource), transform)
        self.transform = transform
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.name = name or (f"{resource.plural}@{namespace}" if namespace else resource.plural)
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.relists = 0  # lists after the first one (for tests and metrics)
        self.watches = 0  # watch requests made (each restart of the watch is one more)
        self.resource_version = ""  # the last one seen (list, event or bookmark)
        self._log = logger or _log
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._items: dict[str, dict[str, Any]] = {}
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._index_values: dict[str, dict[str, tuple[str, ...]]] = {n: {} for n in self._indexers}
        self._handlers: list[Handler] = []
        self._replays: set[asyncio.Future[Any]] = set()
        """Async handlers' replays of the cache for a late handler, still running."""
        self._synced = asyncio.Event()

    # -- handlers and cache reads ------------------------------------------------------------

    def add_handler(self, fn: Handler) -> None:
        """Call `fn(event_type, obj, old)` for every change. A handler added while the informer
        already holds objects (a second reader of a shared cache) is first given each of them
        as ADDED, as client-go's late handlers are, so it misses nothing that came before it."""
        self._handlers.append(fn)
        for key, obj in list(self._items.items()):
            try:
                result = fn(ADDED, obj, None)
            except Exception:
                self._log.error("%s: handler %s failed replaying %s", self.name, _name(fn), key,
                                exc_info=True)  # fmt: skip
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._replays.add(task)
                task.add_done_callback(self._replayed)

    def _replayed(self, task: asyncio.Future[Any]) -> None:
        self._replays.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("%s: a handler failed replaying the cache", self.name,
                            exc_info=task.exception())  # fmt: skip

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Add the index `name`, built at once over what is already cached (so it may be added
        while the informer runs: a second reader of a shared cache, `kube.manager`). The same
        name again with the same function is a no-op; with another, a ValueError."""
        known = self._indexers.get(name)
        if known is not None:
            if known is not fn:
                raise ValueError(
                    f"{self.name}: index {name!r} is already {callable_name(known)}, "
                    f"not {callable_name(fn)}"
                )
            return
        self._indexers[name] = fn
        self._indices[name] = {}
        self._index_values[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, fn, key, obj)

    @property
    def indexers(self) -> dict[str, IndexFunc]:
        return dict(self._indexers)

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the cache and its handlers have been called."""
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait for the first list; False if `timeout` seconds pass first."""
        try:
            async with asyncio.timeout(timeout):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def get_by_key(self, key: str) -> dict[str, Any] | None:
        return self._items.get(key)

    def list(self) -> builtins.list[dict[str, Any]]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def count(self) -> int:
        """How many objects are cached."""
        return len(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[dict[str, Any]]:
        """The cached objects whose index function `index` returned `value`."""
        try:
            keys = self._indices[index].get(value, set())
        except KeyError:
            raise KeyError(f"{self.name}: no index named {index!r}") from None
        return [self._items[k] for k in sorted(keys)]

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list_and_replace()
                    need_list = False
                seen = await self._watch()
                failures = 0 if seen else failures + 1
                if not seen:  # ended at once without an event: do not spin
                    await asyncio.sleep(self._backoff(failures))
            except asyncio.CancelledError:
                raise
            except Gone as e:
                need_list = True
                failures += 1
                delay = self._backoff(failures) if failures > 1 else 0.0
                self._log.warning(
                    "%s: resourceVersion %s expired (%s); relisting",
                    self.name,
                    self.resource_version,
                    e.message,
                )
                await asyncio.sleep(delay)
            except Exception as e:
                need_list = True
                failures += 1
                delay = self._backoff(failures)
                self._log.warning(
                    "%s: list/watch failed, relisting in %.1fs: %s", self.name, delay, e
                )
                await asyncio.sleep(delay)

    def _backoff(self, failures: int) -> float:
        return float(min(self.max_backoff, self.initial_backoff * 2 ** min(failures - 1, 30)))

    async def _list_and_replace(self) -> None:
        items, rv = await self._list_all()
        if self._synced.is_set():
            self.relists += 1
        new = {key_of(obj): obj for obj in items}
        old_items = self._items
        for key, obj in new.items():
            old = old_items.get(key)
            if old is None:
                await self._apply(ADDED, key, obj, None)
            elif _rv(old) != _rv(obj):
                await self._apply(MODIFIED, key, obj, old)
        for key in [k for k in old_items if k not in new]:
            old = old_items[key]
            await self._apply(DELETED, key, old, old)
        self.resource_version = rv
        self._synced.set()

    async def _list_all(self) -> tuple[builtins.list[dict[str, Any]], str]:
        """All pages of one list (one snapshot); an expired continue token starts over
        without paging."""
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        rv = ""
        limit: int | None = self.page_size or None
        while True:
            try:
                page = await self.client.list(
                    self.resource,
                    self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    limit=limit,
                    continue_token=token,
                    metadata_only=self.metadata_only,
                )
            except Gone:
                if token is None:
                    raise
                items, token, rv, limit = [], None, "", None
                continue
            meta = page.get("metadata") or {}
            if not rv:
                rv = str(meta.get("resourceVersion") or "")
            page_items = page.get("items") or []
            if self.transform is not None:
                page_items = [self.transform(obj) for obj in page_items]
            items.extend(page_items)
            token = meta.get("continue") or None
            if not token:
                return items, rv

    async def _watch(self) -> bool:
        """One watch request from the last resourceVersion; True if any event came."""
        seen = False
        self.watches += 1
        async for event_type, obj in self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=self.watch_timeout,
            metadata_only=self.metadata_only,
        ):
            seen = True
            rv = _rv(obj)
            if event_type == "BOOKMARK":
                if rv:
                    self.resource_version = rv
                continue
            if self.transform is not None:
                obj = self.transform(obj)
            key = key_of(obj)
            old = self._items.get(key)
            if event_type in (ADDED, MODIFIED):
                await self._apply(MODIFIED if old is not None else ADDED, key, obj, old)
            elif event_type == DELETED and old is not None:
                await self._apply(DELETED, key, obj, old)
            if rv:
                self.resource_version = rv
        return seen

    # -- cache updates -----------------------------------------------------------------------

    async def _apply(
        self, event_type: str, key: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event_type == DELETED:
            self._items.pop(key, None)
        else:
            self._items[key] = obj
        self._reindex(key, None if event_type == DELETED else obj)
        for handler in self._handlers:
            try:
                result = handler(event_type, obj, old)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.error(
                    "%s: handler %s failed on %s %s",
                    self.name,
                    getattr(handler, "__qualname__", handler),
                    event_type,
                    key,
                    exc_info=True,
                )

    def _reindex(self, key: str, obj: dict[str, Any] | None) -> None:
        for index, fn in self._indexers.items():
            by_value = self._indices[index]
            for value in self._index_values[index].pop(key, ()):
                keys = by_value.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del by_value[value]
            if obj is not None:
                self._index_one(index, fn, key, obj)

    def _index_one(self, index: str, fn: IndexFunc, key: str, obj: dict[str, Any]) -> None:
        try:
            values = tuple(fn(obj))
        except Exception:
            self._log.error("%s: index %s failed on %s", self.name, index, key, exc_info=True)
            return
        self._index_values[index][key] = values
        by_value = self._indices[index]
        for value in values:
            by_value.setdefault(value, set()).add(key)


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without `metadata.managedFields` (changed in place: it was just decoded)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def as_metadata(obj: dict[str, Any], resource: Resource) -> dict[str, Any]:
    """`obj` (a `PartialObjectMetadata`, or a whole object) as a metadata-only cache keeps it:
    the resource's apiVersion and kind, its metadata without managedFields."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}


def _then(first: Transform, second: Transform | None) -> Transform:
    if second is None:
        return first
    return lambda obj: second(first(obj))


def callable_name(fn: object) -> str:
    """A function as an error message names it: `module.qualname`."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{name}" if module else str(name)


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


async def wait_synced(informers: Iterable[Informer], timeout: float | None = None) -> None:
    """Wait until every informer has listed once (TimeoutError after `timeout` seconds)."""
    async with asyncio.timeout(timeout):
        await asyncio.gather(*(i.wait_synced() for i in informers))


def unsynced(informers: Iterable[Informer]) -> dict[str, str]:
    """Readiness problems: `informer/<name>` for each one that has not listed yet."""
    return {f"informer/{i.name}": "cache not synced yet" for i in informers if not i.has_synced}


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", fn))
