"""The store: entries per kind with their resourceVersions, the event log watches read, pages."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.demo.kube_api.resources import Resource

# ---------------------------------------------------------------------------------- storage


_NO_FIELDS: Mapping[str, str] = {}


class _Entry:
    """One stored object: its bytes and what list filtering needs, immutable once built."""

    __slots__ = ("fields", "key", "labels", "name", "namespace", "raw", "rv")

    def __init__(
        self,
        key: str,
        namespace: str,
        name: str,
        raw: bytes,
        labels: Mapping[str, str],
        fields: Mapping[str, str],
        rv: int,
    ) -> None:
        self.key, self.namespace, self.name, self.raw = key, namespace, name, raw
        self.labels, self.fields, self.rv = labels, fields, rv


class _Event:
    __slots__ = ("entry", "prev", "rv", "type")

    def __init__(self, rv: int, type_: str, entry: _Entry, prev: _Entry | None) -> None:
        self.rv, self.type, self.entry, self.prev = rv, type_, entry, prev


class _Store:
    """The objects of one kind: a dict by key plus a lazily re-sorted key list for paging."""

    def __init__(self, res: Resource) -> None:
        self.res = res
        self.entries: dict[str, _Entry] = {}
        self._keys: list[str] = []
        self._sorted = True
        self.events: list[_Event] = []
        self.floor_rv = 0  # events at or below this resourceVersion were dropped

    def insert(self, entry: _Entry) -> _Entry | None:
        prev = self.entries.get(entry.key)
        self.entries[entry.key] = entry
        if prev is None and self._sorted:
            keys = self._keys
            if not keys or entry.key > keys[-1]:
                keys.append(entry.key)
            elif len(keys) < 4096:
                bisect.insort(keys, entry.key)
            else:  # bulk loads out of order: sort once when next listed
                self._sorted = False
        return prev

    def remove(self, key: str) -> _Entry | None:
        prev = self.entries.pop(key, None)
        if prev is not None and self._sorted:
            i = bisect.bisect_left(self._keys, key)
            if i < len(self._keys) and self._keys[i] == key:
                del self._keys[i]
        return prev

    def keys(self) -> list[str]:
        if not self._sorted:
            self._keys = sorted(self.entries)
            self._sorted = True
        return self._keys

    def key_range(self, namespace: str | None) -> tuple[int, int]:
        keys = self.keys()
        if namespace is None or not self.res.namespaced:
            return 0, len(keys)
        # "ns/" .. "ns0": '0' is the character after '/', so one namespace is one contiguous run.
        return bisect.bisect_left(keys, namespace + "/"), bisect.bisect_left(keys, namespace + "0")

    def in_namespace(self, key: str, namespace: str | None) -> bool:
        return namespace is None or not self.res.namespaced or key.startswith(namespace + "/")

    def state_at(self, rv: int) -> dict[str, _Entry | None]:
        """The keys changed after revision `rv`, each with its entry as of `rv` (None: absent then).
        Needs every event after `rv`: callers check `rv >= floor_rv` first."""
        changed: dict[str, _Entry | None] = {}
        for event in self.events_after(rv):
            changed.setdefault(event.entry.key, event.prev)
        return changed

    def count_at(
        self, namespace: str | None, last: str, hi: int, changed: Mapping[str, _Entry | None]
    ) -> int:
        """How many objects of the snapshot `changed` describes come after key `last` (up to index
        `hi` of the current keys): a page's remainingItemCount."""
        keys = self.keys()
        count = hi - bisect.bisect_right(keys, last, 0, hi)
        for key, entry in changed.items():
            if key > last and self.in_namespace(key, namespace):
                count += (entry is not None) - (key in self.entries)
        return count

    def compact(self, rv: int) -> None:
        """Forget the history at and below revision `rv`: nothing can be read as of before it."""
        drop = bisect.bisect_right(self.events, rv, key=lambda e: e.rv)
        del self.events[:drop]
        self.floor_rv = max(self.floor_rv, rv)

    def log(self, event: _Event, max_events: int) -> None:
        self.events.append(event)
        if len(self.events) > max_events:
            drop = len(self.events) - max_events // 2
            self.floor_rv = self.events[drop - 1].rv
            del self.events[:drop]

    def events_after(self, rv: int) -> list[_Event]:
        i = bisect.bisect_right(self.events, rv, key=lambda e: e.rv)
        return self.events[i:]


def _page_at(
    store: _Store,
    namespace: str | None,
    start_key: str | None,
    lo: int,
    hi: int,
    changed: Mapping[str, _Entry | None],
    limit: int,
    pred: Callable[[_Entry], bool] | None,
) -> tuple[list[bytes], bool, str]:
    """(items, more, last key) of a page of the store as it was before the `changed` keys changed:
    the run of current keys `lo:hi` merged with the earlier entries of the changed ones."""
    keys, entries = store.keys(), store.entries
    earlier = sorted(
        key
        for key, entry in changed.items()
        if entry is not None and store.in_namespace(key, namespace) and (start_key is None or key > start_key)
    )
    items: list[bytes] = []
    last = ""
    i, j = lo, 0
    while i < hi or j < len(earlier):
        entry: _Entry | None
        if j < len(earlier) and (i >= hi or earlier[j] < keys[i]):
            entry = changed[earlier[j]]
            j += 1
        else:
            key = keys[i]
            i += 1
            if key in changed:  # its state then is among `earlier`, or it did not exist
                continue
            entry = entries[key]
        if entry is None or (pred is not None and not pred(entry)):
            continue
        if 0 < limit == len(items):
            return items, True, last
        items.append(entry.raw)
        last = entry.key
    return items, False, last


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _field_value(obj: Mapping[str, Any], path: tuple[str, ...], default: str = "") -> str:
    """A field-selector label's value as the API compares it (strings; booleans as true/false)."""
    cur: Any = obj
    for part in path:
        if type(cur) is not dict:
            return default
        cur = cur.get(part)
        if cur is None:
            return default
    if cur is True or cur is False:
        return "true" if cur else "false"
    return cur if type(cur) is str else str(cur)
