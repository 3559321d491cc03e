"""`run`'s plan stage reads the cluster from here: each kind listed once, then kept current by a watch.

client-go's reflector and informer, in Python. Per kind, with the very lists of kube/live.py
(`LiveReader.lists`: the same selectors, paging, decoders and converters): list, then watch from
the list's resourceVersion with allowWatchBookmarks. ADDED / MODIFIED / DELETED change a store keyed
by (namespace, name); every event and BOOKMARK advances the resourceVersion; a watch that ends is
resumed from it; 410 Gone (at the watch's start or as an ERROR event) lists again; so does an error
that is an answer (a 403, an ERROR event), after a backoff; a dropped connection or a 5xx only
watches again. Every `resync` seconds (run.resyncInterval) the kind is listed again anyway.

The store holds what the planner's model is made of (kube/parse.py's objects), converted once per
change; a relist keeps every object whose resourceVersion it shows unchanged, and starts new
interning tables, so memory follows the cluster, not its history. The objects stay in key order,
so the ClusterState of an idle cycle costs a few tuple copies, not a list of 150k pods; it equals
the one a fresh LiveReader read builds (tests/integration/test_kube_cache.py checks that).

cluster-autoscaler's Lease and status ConfigMap are watched by name in every namespace, as the live
read lists them (only the configured namespaces' count); where that list is forbidden the state
says so and each cycle reads those namespaces by name, as the live read does. Namespaces we may
not list are "not read", as there.

The Pod reflector also wakes the plan: each pod is reported to `on_unschedulable` once per
transition into PodScheduled=False/Unschedulable (forgotten when it is bound, no longer
unschedulable, or gone; a relist reports only pods it did not know), so `run` has one watch on Pods.

Only `run`'s plan stage reads this. apply (its re-check before a drain included) and every
one-shot command read the cluster live.
"""

from __future__ import annotations

import bisect
import ctypes
import gc
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.backoff import EQUAL_JITTER, Backoff
from reconciler.domain.model import ClusterState, Pod
from reconciler.kube.autoscaler import (
    DEFAULT_LEASE,
    DEFAULT_NAMESPACES,
    DEFAULT_STATUS_CONFIGMAP,
    judge_autoscaler,
)
from reconciler.kube.errors import KubernetesError
from reconciler.kube.live import NAMESPACES_FORBIDDEN, REQUIRED_KINDS, ListForbidden, LiveReader
from reconciler.kube.parse import TERMINAL_PHASES, UNREADABLE, ObjectReader, Raw, left_out, readable
from reconciler.kube.retry import transient
from reconciler.kube.schema import decode_item
from reconciler.kube.state import left_out_warnings
from reconciler.kube.watch_stream import describe, lines, shut

_log = logging.getLogger(__name__)

OPTIONAL_KINDS = ("Namespace", "Lease", "ConfigMap")  # a 403 on their list is noted, not fatal
KINDS = REQUIRED_KINDS + OPTIONAL_KINDS
_QUICK_END = 1.0  # a watch that ends this soon with no event counts as a failure (no hot loop)

Key = tuple[str, str]  # (namespace, name): sorts as the ClusterState wants (StateBuilder.build)


class _Event(TypedDict, total=False):
    type: str
    object: msgspec.Raw  # the object, a BOOKMARK's bare metadata, or an ERROR's Status


class _Status(TypedDict, total=False):
    code: int
    reason: str
    message: str


_event_decoder = msgspec.json.Decoder(_Event)
_status_decoder = msgspec.json.Decoder(_Status)


class NotSynced(KubernetesError):
    """The cache has not listed every kind yet: there is no picture to plan from."""


class _Gone(Exception):
    """410: the resourceVersion is older than the server keeps; only a new list helps."""


class _Failed(Exception):
    """The watch failed; `relist`: with an answer that watching again would only repeat."""

    def __init__(self, message: str, *, relist: bool) -> None:
        super().__init__(message)
        self.relist = relist


@dataclass(frozen=True)
class KindHealth:
    """One kind's cache, for metrics and /readyz."""

    kind: str
    synced: bool  # listed at least once since the cache started
    objects: int
    last_event: float | None  # Unix time of the last list, event or bookmark
    relists: Mapping[str, int]  # lists after the first, by reason: expired, resync, error
    problem: str  # the failure being retried, "" while it works


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic collector off while lists convert (LiveReader.read's reason: millions of objects
    and no cycles), counted across the reflectors' threads so the last one out turns it back on."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


def _libc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    return trim


_malloc_trim = _libc_trim()


def _give_memory_back() -> None:
    """After a list: the page buffers were allocated and freed on short-lived threads (the prefetch
    of kube/live.py), and glibc keeps such memory in its per-thread arenas; without this a process
    that lists 600 MB every resync grows by what the arenas hold on to (benchmarks/steady_state.py)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _converter(kind: str, reader: ObjectReader, names: Mapping[str, str]) -> Callable[[Raw], Any]:
    """Raw object -> what the store keeps of it (StateBuilder.add's conversions); None: nothing."""
    if kind == "Pod":

        def pod(raw: Raw) -> Pod | None:
            if (raw.get("status") or {}).get("phase") in TERMINAL_PHASES:
                return None
            return reader.pod(raw)

        return pod
    simple: dict[str, Callable[[Raw], Any]] = {
        "Node": reader.node,
        "PodDisruptionBudget": reader.pdb,
        "DaemonSet": reader.daemonset,
        "PersistentVolume": reader.pv,
        "PersistentVolumeClaim": reader.pvc,
    }
    if kind in simple:
        return simple[kind]
    if kind == "Namespace":
        return lambda raw: reader.namespace(raw)[1]
    wanted = names[kind]  # cluster-autoscaler's Lease or ConfigMap: kept whole, for judge_autoscaler
    return lambda raw: raw if (raw.get("metadata") or {}).get("name") == wanted else None


def _key(raw: Raw) -> Key:
    meta = raw.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _unschedulable(pod: Any) -> bool:
    """PodScheduled=False with reason Unschedulable: the scheduler found no node for it."""
    return (
        isinstance(pod, Pod)
        and not pod.node_name
        and pod.scheduled_status == "False"
        and pod.scheduled_reason == "Unschedulable"
    )


# What the store keeps per object: (resourceVersion, converted object, its key). The key is kept too so
# that a relist showing the object unchanged reuses it (and the strings in it) instead of holding on
# to the copy the list decoded: an unchanged cluster's relist leaves nothing new behind.
Entry = tuple[str, Any, Key]


class _Store:
    """One kind's objects: an Entry by key, and the objects in key order, rebuilt only after a
    change. The reflector's thread writes; plans read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: dict[Key, Entry] = {}
        self._keys: list[Key] = []
        self._objects: tuple[Any, ...] | None = ()

    def __len__(self) -> int:
        return len(self.items)

    def put(self, key: Key, version: str, value: Any) -> None:
        with self._lock:
            if key not in self.items:
                bisect.insort(self._keys, key)
            self.items[key] = (version, value, key)
            self._objects = None

    def delete(self, key: Key) -> None:
        with self._lock:
            if self.items.pop(key, None) is None:
                return
            del self._keys[bisect.bisect_left(self._keys, key)]
            self._objects = None

    def replace(self, items: dict[Key, Entry]) -> None:
        keys = sorted(items)
        with self._lock:
            self.items, self._keys, self._objects = items, keys, None

    def objects(self) -> tuple[Any, ...]:
        with self._lock:
            if self._objects is None:
                items = self.items
                self._objects = tuple(items[key][1] for key in self._keys)
            return self._objects

    def by_name(self) -> dict[str, Any]:
        with self._lock:
            return {key[1]: self.items[key][1] for key in self._keys}


class Reflector:
    """One kind: list, watch, apply events, list again when needed; on a daemon thread of its own."""

    def __init__(
        self,
        kind: str,
        reader: LiveReader,
        *,
        resync: float,
        watch_timeout: int,
        request_timeout: float,
        clock: Callable[[], float],
        wall: Callable[[], float],
        initial_backoff: float,
        max_backoff: float,
        relisted: Callable[[str, str], None],
        on_unschedulable: Callable[[str], None] | None = None,
    ) -> None:
        self.kind = kind
        self.reader = reader
        self.call, self.params = reader.lists[kind]
        self.names = {"Lease": reader.autoscaler_lease, "ConfigMap": reader.autoscaler_status}
        self.resync = resync
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.clock, self.wall = clock, wall
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self._backoff = Backoff(initial_backoff, max(initial_backoff, max_backoff), spread=EQUAL_JITTER)
        self._relisted = relisted
        self.on_unschedulable = on_unschedulable if kind == "Pod" else None
        self.store = _Store()
        # objects that cannot be read, by key: each left out with a warning, never a failed list or
        # watch (a tenant's pod would make the reflector relist and fail for ever); replaced whole
        # on every change, so a plan's thread reads it without a lock
        self.left_out: Mapping[Key, str] = {}
        self.version = ""  # the newest resourceVersion seen
        self.synced = threading.Event()
        self.forbidden = False  # an optional kind whose list answered 403: listed again at resync
        self.lists = 0
        self.last_event: float | None = None
        self.broken_since: float | None = None  # clock() when the picture stopped being kept current
        self.problem = ""
        self._convert: Callable[[Raw], Any] = _converter(kind, ObjectReader(), self.names)
        self._known: set[Key] = set()  # pods reported unschedulable and not since bound or gone
        self._resync_at = 0.0
        self._failures = 0
        self._trouble: set[str] = set()  # the kinds of failure said since it last worked
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"cache-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end: an open watch is shut at once; a list in flight ends within the
        request timeout (the thread is a daemon: nothing waits for it beyond `join`'s bound)."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            shut(response)

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, timeout))

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        listing, reason = True, ""  # reason: why the next list ("" the first)
        quick = 0
        while not self._stop.is_set():
            began = time.monotonic()
            events = -1
            if not listing and self.clock() >= self._resync_at:  # whatever state the watch is in
                listing, reason = True, "resync"
            try:
                if listing:
                    self._list(reason)
                    listing = False
                    _give_memory_back()  # what the list freed, once its locals are gone
                if self.forbidden:  # asked again at the resync
                    self._stop.wait(max(0.0, self._resync_at - self.clock()))
                    continue
                events = self._watch()
            except _Gone:
                _log.info(
                    "cluster cache: %ss: resourceVersion %s is too old: listing again",
                    self.kind,
                    self.version,
                )
                self._broken("the resourceVersion expired (410 Gone)")
                listing, reason = True, "expired"
            except Exception as exc:  # every other failure, a bug included: back off and go on
                if self._stop.is_set():
                    return
                if not listing and _relists(exc):
                    listing, reason = True, "error"
                self._failed(exc)
                continue
            # client-go's backoff manager, in short: a server that keeps ending watches at once
            # (410 after 410, a stream cut after one event) is never asked again in a tight loop
            if events <= 0 and time.monotonic() - began < _QUICK_END:
                quick += 1
                self._stop.wait(self._backoff.delay(quick - 1))
            else:
                quick = 0

    def _broken(self, problem: str) -> None:
        if self.broken_since is None:
            self.broken_since = self.clock()
        self.problem = problem

    def _failed(self, exc: Exception) -> None:
        self._failures += 1
        delay = self._backoff.delay(self._failures - 1)
        kind, why = describe(exc, self.reader.api.configuration.host, (_Failed,))
        self._broken(why)
        if kind not in self._trouble:  # each kind of failure said once per outage, not per retry
            self._trouble.add(kind)
            _log.warning(
                "cluster cache: %ss: %s; trying again with backoff (at most %gs)",
                self.kind,
                why,
                self.max_backoff,
                exc_info=kind == "bug",
            )
        else:
            _log.debug("cluster cache: %ss: %s; trying again in %.1fs", self.kind, why, delay)
        self._stop.wait(delay)

    def _working(self) -> None:
        self._failures = 0
        self.broken_since = None
        self.problem = ""
        if self._trouble:
            self._trouble.clear()
            _log.info("cluster cache: %ss: watching again", self.kind)

    # ------------------------------------------------------------------ list

    def _list(self, reason: str) -> None:
        """Every object of the kind now (LiveReader.list_kind: paged, the live read's decoders):
        the store replaced, keeping the objects whose resourceVersion is unchanged."""
        reader = ObjectReader()  # new interning tables: what they hold follows the cluster of now
        convert = _converter(self.kind, reader, self.names)
        old = self.store.items  # only this thread writes it
        fresh: dict[Key, Entry] = {}
        unread: dict[Key, str] = {}

        def add(items: list[dict[str, Any]]) -> None:
            for raw in items:
                meta = raw.get("metadata") or {}
                key = (meta.get("namespace") or "", meta.get("name") or "")
                version = meta.get("resourceVersion") or ""
                kept = old.get(key)
                if kept is not None and version and kept[0] == version:
                    fresh[kept[2]] = kept
                    continue
                try:
                    value = convert(readable(raw))
                except UNREADABLE as exc:
                    unread[key] = left_out(self.kind, raw, exc)
                    continue
                if value is not None:
                    fresh[key] = (version, value, key)

        forbidden = False
        with _no_gc():

            def again() -> None:
                fresh.clear()
                unread.clear()

            try:
                version = self.reader.list_kind(self.kind, add, again)
            except ListForbidden as exc:
                if self.kind not in OPTIONAL_KINDS:
                    raise
                forbidden, version, fresh = True, "", {}
                if not self.forbidden:
                    _log.warning("cluster cache: %s (asked again every resync)", exc)
        if self._stop.is_set():
            return
        self.forbidden = forbidden
        self._convert = convert
        self.store.replace(fresh)
        self.left_out = unread
        self.version = version
        self._resync_at = self.clock() + self.resync
        self.last_event = self.wall()
        self.lists += 1
        if reason:
            self._relisted(self.kind, reason)
        self._working()
        self.synced.set()
        if self.on_unschedulable is not None:
            found = {key for key, (_, pod, _) in fresh.items() if _unschedulable(pod)}
            new = found - self._known
            self._known = found
            for key in sorted(new):
                self._report(key)

    # ------------------------------------------------------------------ watch

    def _watch(self) -> int:
        """One watch from the kept resourceVersion until the server ends it (at the latest when a
        resync is due) or stop(); returns how many events (bookmarks included) it delivered."""
        seconds = max(1, min(self.watch_timeout, math.ceil(self._resync_at - self.clock())))
        try:
            response: Any = self.call(
                watch=True,
                resource_version=self.version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=seconds,
                _preload_content=False,
                _request_timeout=(self.request_timeout, seconds + max(5.0, seconds / 10)),
                **self.params,
            )
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        with self._lock:
            self._response = response
        started = time.monotonic()
        events = 0
        try:
            if self._stop.is_set():
                return 0
            # the server took the watch: the picture is kept current again (what failed before is
            # said to work once the watch delivers or lasts)
            self.broken_since, self.problem = None, ""
            for line in lines(response):
                if not events:
                    self._working()
                events += 1
                self._event(line)
                if self._stop.is_set():
                    break
        finally:
            with self._lock:
                self._response = None
            response.close()
            response.release_conn()
        if not events and not self._stop.is_set() and time.monotonic() - started < _QUICK_END:
            raise _Failed("the server ended the watch at once", relist=False)
        self._working()
        return events

    def _event(self, line: bytes) -> None:
        event = _event_decoder.decode(line)
        kind = event.get("type") or ""
        raw = event.get("object")
        if raw is None:
            return
        if kind == "ERROR":
            status = _status_decoder.decode(raw)
            if status.get("code") == 410:
                raise _Gone()
            raise _Failed(
                f"the watch answered HTTP {status.get('code')} {status.get('reason') or ''}: "
                f"{status.get('message') or ''}",
                relist=True,
            )
        document = decode_item(self.kind, raw)
        version = (document.get("metadata") or {}).get("resourceVersion") or ""
        if version:
            self.version = version
        self.last_event = self.wall()
        if kind == "BOOKMARK":
            return
        key = _key(document)
        value = None
        problem = ""
        if kind in ("ADDED", "MODIFIED"):
            try:
                value = self._convert(readable(document))
            except UNREADABLE as exc:
                problem = left_out(self.kind, document, exc)
        if problem:
            self.left_out = {**self.left_out, key: problem}
        elif key in self.left_out:
            self.left_out = {k: v for k, v in self.left_out.items() if k != key}
        if value is None:  # deleted, or (with the selector) no longer one of ours: a finished pod
            self.store.delete(key)
        else:
            self.store.put(key, version, value)
        if self.on_unschedulable is not None:
            if _unschedulable(value):
                if key not in self._known:
                    self._known.add(key)
                    self._report(key)
            else:
                self._known.discard(key)

    def _report(self, key: Key) -> None:
        assert self.on_unschedulable is not None
        try:
            self.on_unschedulable(f"{key[0]}/{key[1]}")
        except Exception:  # the caller's bug must not end the watch
            _log.exception("cluster cache: on_unschedulable(%s/%s) failed", *key)


class ClusterCache:
    """Every kind the planner reads, each behind its Reflector. `state(now)` is what LiveReader's
    `read(now)` would return, from memory. start() and stop() follow the plan stage's leadership."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        page_size: int = 500,
        autoscaler_names: tuple[str, str] = (DEFAULT_LEASE, DEFAULT_STATUS_CONFIGMAP),
        autoscaler_namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
        resync: float = 600.0,
        on_unschedulable: Callable[[str], None] | None = None,
        request_timeout: float = 30.0,
        watch_timeout: int = 300,
        stale_after: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        initial_backoff: float = 1.0,
        max_backoff: float = 30.0,
    ) -> None:
        self.api = api
        self.page_size = page_size
        self.autoscaler_names = autoscaler_names
        self.resync = resync
        self.on_unschedulable = on_unschedulable
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.stale_after = stale_after
        self.clock, self.wall = clock, wall
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self.reader = LiveReader(api, page_size, autoscaler_names, autoscaler_namespaces)
        self._reflectors: dict[str, Reflector] = {}
        self._relists: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.started_at: float | None = None

    @property
    def running(self) -> bool:
        return bool(self._reflectors)

    def start(self) -> None:
        """List and watch every kind, from nothing (a new leader does not trust an old picture)."""
        if self._reflectors:
            return
        self.started_at = time.monotonic()
        self._reflectors = {
            kind: Reflector(
                kind,
                self.reader,
                resync=self.resync,
                watch_timeout=self.watch_timeout,
                request_timeout=self.request_timeout,
                clock=self.clock,
                wall=self.wall,
                initial_backoff=self.initial_backoff,
                max_backoff=self.max_backoff,
                relisted=self._relisted,
                on_unschedulable=self.on_unschedulable,
            )
            for kind in KINDS
        }
        for reflector in self._reflectors.values():
            reflector.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch and forget the picture; waits at most `timeout` for the threads."""
        reflectors, self._reflectors = list(self._reflectors.values()), {}
        for reflector in reflectors:
            reflector.stop()
        deadline = time.monotonic() + timeout
        for reflector in reflectors:
            reflector.join(deadline - time.monotonic())

    def _relisted(self, kind: str, reason: str) -> None:
        with self._lock:
            self._relists[(kind, reason)] += 1

    # ------------------------------------------------------------------ readiness

    def synced(self) -> bool:
        reflectors = self._reflectors
        return bool(reflectors) and all(r.synced.is_set() for r in reflectors.values())

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for reflector in list(self._reflectors.values()):
            if not reflector.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return self.synced()

    def waiting_for(self) -> str:
        """What the cache waits for before a plan can use it ("" when synced): the kinds not listed
        yet, each with the failure being retried."""
        reflectors = self._reflectors
        if not reflectors:
            return "the cluster cache to start"
        waiting = [
            f"{r.kind}s" + (f" ({r.problem})" if r.problem else "")
            for r in reflectors.values()
            if not r.synced.is_set()
        ]
        return f"the cluster cache's first list of {', '.join(waiting)}" if waiting else ""

    def health(self) -> list[KindHealth]:
        reflectors = self._reflectors
        with self._lock:
            relists = dict(self._relists)
        found = []
        for kind in KINDS:
            r = reflectors.get(kind)
            counts = {reason: n for (k, reason), n in relists.items() if k == kind}
            if r is None:
                found.append(KindHealth(kind, False, 0, None, counts, ""))
            else:
                found.append(
                    KindHealth(kind, r.synced.is_set(), len(r.store), r.last_event, counts, r.problem)
                )
        return found

    # ------------------------------------------------------------------ the picture

    def state(self, now: datetime) -> ClusterState:
        """The cluster as the watches have it now, as LiveReader.read(now) would build it.
        NotSynced before every kind is listed; an OperationError when a kind has not been kept
        current for longer than `stale_after` seconds (its watch and lists keep failing): a plan
        from an old picture would act on pods that are long gone."""
        reflectors = self._reflectors
        if not self.synced():
            raise NotSynced(
                f"Kubernetes API: the cluster cache is not synced yet: waiting for {self.waiting_for()}"
            )
        moment = self.clock()
        stale = [
            f"{r.kind}s for {moment - r.broken_since:.0f}s ({r.problem})"
            for r in reflectors.values()
            if r.broken_since is not None and moment - r.broken_since > self.stale_after
        ]
        if stale:
            raise KubernetesError(
                "Kubernetes API: the cluster cache is stale: not kept current: "
                + "; ".join(stale)
                + "; planning waits until its watches or lists work again"
            )
        warnings: list[str] = []
        namespaces: dict[str, Mapping[str, str]] | None = None
        if reflectors["Namespace"].forbidden:
            warnings.append(NAMESPACES_FORBIDDEN)
        else:
            namespaces = reflectors["Namespace"].store.by_name()
        evidence: dict[str, list[Raw]] = {}
        unchecked: list[str] = []
        for kind in ("Lease", "ConfigMap"):
            reflector = reflectors[kind]
            if reflector.forbidden:  # the live read's fallback, each cycle: the configured namespaces
                warning, found = self.reader.autoscaler_where_configured(kind)
                warnings.append(warning)
                unchecked.append(warning)
                evidence[kind] = list(found)
            else:
                evidence[kind] = list(reflector.store.objects())
        warnings.extend(
            left_out_warnings(
                message for kind in KINDS for _, message in sorted(reflectors[kind].left_out.items())
            )
        )
        autoscaler, doubts = judge_autoscaler(
            evidence["ConfigMap"], evidence["Lease"], now, self.reader.autoscaler_namespaces
        )
        warnings.extend(doubts)
        return ClusterState(
            nodes=reflectors["Node"].store.objects(),
            pods=reflectors["Pod"].store.objects(),
            pdbs=reflectors["PodDisruptionBudget"].store.objects(),
            daemonsets=reflectors["DaemonSet"].store.objects(),
            pvs=reflectors["PersistentVolume"].store.objects(),
            pvcs=reflectors["PersistentVolumeClaim"].store.objects(),
            autoscaler=autoscaler,
            autoscaler_unchecked=tuple(unchecked),
            read_at=now,
            namespaces=namespaces,
            warnings=tuple(warnings),
        )

    def relists(self, kind: str, reason: str) -> int:
        with self._lock:
            return self._relists[(kind, reason)]

    def reflector(self, kind: str) -> Reflector:
        return self._reflectors[kind]


def _relists(exc: Exception) -> bool:
    """A watch failure that watching again would only repeat: an answer (403, 400, an ERROR event,
    an unreadable event), not a moment's trouble (no answer, a 5xx, a 429)."""
    if isinstance(exc, _Failed):
        return exc.relist
    if isinstance(exc, ApiException | urllib3.exceptions.HTTPError):
        return not transient(exc)
    return True
