"""Cluster state from the live API: every list paged (`limit`/`continue`) and read as raw JSON.

The official client's model classes cost ~1 ms per pod; reading raw JSON (`_preload_content=False`)
and converting straight into our model is what makes 150k pods a matter of seconds. The next page is
fetched on a second thread while the current one is converted (socket reads release the GIL), and
pages are decoded with the pruned schemas of `kube.schema`. That thread is a daemon and nothing
joins it: a read stuck on a hung server can neither hold the process at exit nor keep Ctrl-C from
ending it (a ThreadPoolExecutor's worker is joined on shutdown and again at interpreter exit).

Every page of a list is served at the first page's revision, and etcd forgets old revisions (the
API server compacts every 5 minutes): a continue token older than that answers 410 Expired. As
client-go's pager, the list then starts again from the beginning, dropping what it had of that
kind; up to LIST_RESTARTS times in a row, then the read fails. (client-go falls back to one unpaged
list instead: at 150k pods that is one ~600 MB answer the API server must build in memory.)
"""

from __future__ import annotations

import gc
import logging
import re
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, Generic, TypeVar, cast

import msgspec
import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.model import ClusterState
from reconciler.kube.autoscaler import DEFAULT_LEASE, DEFAULT_NAMESPACES, DEFAULT_STATUS_CONFIGMAP
from reconciler.kube.errors import KubernetesError
from reconciler.kube.retry import spent, timed_out, with_retries
from reconciler.kube.schema import decode_list
from reconciler.kube.state import StateBuilder

NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
LIST_RESTARTS = 3  # times a paged list whose continue token expired is started again, then it fails
# Kinds a plan cannot do without (a 403 fails the read); Namespaces and cluster-autoscaler's evidence
# are optional: without them the state says what it could not see.
REQUIRED_KINDS = (
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "DaemonSet",
    "PersistentVolume",
    "PersistentVolumeClaim",
)
# Namespaces are optional: without them only affinity terms with a namespaceSelector go unmodelled,
# so an identity that may not list them still plans (and says so).
NAMESPACES_FORBIDDEN = (
    "namespaces not read: list namespaces is forbidden (grant `list` on `namespaces`, cluster-wide: "
    "docs/deploy-kubernetes.md); pod affinity terms with a namespaceSelector are not modelled"
)
_TIMEOUT = re.compile(r"\((?:read|connect) timeout=([0-9.]+)\)")
_log = logging.getLogger(__name__)

T = TypeVar("T")


class _Prefetch(Generic[T]):
    """`call()` started now on a daemon thread; `result()` waits for it (interruptibly) and returns
    its value or raises its exception."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._call = call
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, name="kube-prefetch", daemon=True).start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to the reader's thread
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> T:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


class ListForbidden(KubernetesError):
    """A list RBAC does not let us read (HTTP 403): fatal for most kinds, noted for optional ones."""


class ContinueExpired(Exception):
    """A paged list's continue token outlived etcd's history (410 Expired): list again from the start."""


def continue_expired(exc: ApiException, token: str | None) -> bool:
    """The answer to a continued page whose revision etcd compacted. The API server sends 410 on a
    list only for that (reason Expired; client-go's pager goes by the reason, a 410 is enough here)."""
    return bool(token) and exc.status == 410


def restarting(what: str, listing: Callable[[], T], again: Callable[[], None] = lambda: None) -> T:
    """`listing()`, a whole paged list, begun again whenever its continue token expires (after
    `again()` drops what it had gathered), at most LIST_RESTARTS more times; then an OperationError."""
    for restart in range(LIST_RESTARTS + 1):
        try:
            return listing()
        except ContinueExpired:
            if restart == LIST_RESTARTS:
                break
            _log.info(
                "%s: the continue token expired (etcd compacted); listing again from the start (%d of %d)",
                what,
                restart + 1,
                LIST_RESTARTS,
            )
            again()
    raise KubernetesError(
        f"Kubernetes API: {what}: the continue token expired {LIST_RESTARTS + 1} times in a row "
        "(HTTP 410 Expired: the API server compacted the list's revision before its last page); "
        "a listing takes longer than it keeps history (--etcd-compaction-interval, 5m by default): "
        "raise kubernetes.pageSize for fewer pages, or look at the API server's load"
    )


class LiveReader:
    """Reads everything the planner needs from one API server."""

    def __init__(
        self,
        api: k8s.ApiClient,
        page_size: int = 500,
        autoscaler_names: tuple[str, str] = (DEFAULT_LEASE, DEFAULT_STATUS_CONFIGMAP),
        autoscaler_namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
    ) -> None:
        self.api = api
        self.page_size = page_size
        self.autoscaler_lease, self.autoscaler_status = autoscaler_names
        self.autoscaler_namespaces = autoscaler_namespaces
        self.core = k8s.CoreV1Api(api)
        self.apps = k8s.AppsV1Api(api)
        self.policy = k8s.PolicyV1Api(api)
        self.coordination = k8s.CoordinationV1Api(api)
        # Every list the planner's picture is made of, with its selector: this read and `run`'s
        # watch-fed cache (kube/cache.py) list (and watch) exactly these. cluster-autoscaler's Lease
        # and status ConfigMap are asked for by name in every namespace (see _find_autoscaler).
        self.lists: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
            "Node": (self.core.list_node, {}),
            "Pod": (self.core.list_pod_for_all_namespaces, {"field_selector": NOT_TERMINAL}),
            "PodDisruptionBudget": (self.policy.list_pod_disruption_budget_for_all_namespaces, {}),
            "DaemonSet": (self.apps.list_daemon_set_for_all_namespaces, {}),
            "PersistentVolume": (self.core.list_persistent_volume, {}),
            "PersistentVolumeClaim": (self.core.list_persistent_volume_claim_for_all_namespaces, {}),
            "Namespace": (self.core.list_namespace, {}),
            "Lease": (
                self.coordination.list_lease_for_all_namespaces,
                {"field_selector": f"metadata.name={self.autoscaler_lease}"},
            ),
            "ConfigMap": (
                self.core.list_config_map_for_all_namespaces,
                {"field_selector": f"metadata.name={self.autoscaler_status}"},
            ),
        }

    def read(self, now: datetime, *, pods: bool = True) -> ClusterState:
        """The cluster; `pods=False`: its nodes and cluster-autoscaler's presence only (no pods, PDBs,
        DaemonSets, volumes nor namespaces), for an apply that has no removal to judge."""
        # Listing builds millions of long-lived objects and no cycles; the cyclic collector would
        # rescan them over and over (about half the time at 150k pods), so it waits until we are done.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._read(now, pods)
        finally:
            if collecting:
                gc.enable()

    def _read(self, now: datetime, pods: bool) -> ClusterState:
        builder = StateBuilder(self.autoscaler_lease, self.autoscaler_status, self.autoscaler_namespaces)
        for kind in REQUIRED_KINDS if pods else ("Node",):
            self.list_kind(kind, partial(builder.add_all, kind), partial(builder.forget, kind))
        try:
            if pods:
                self.list_kind(
                    "Namespace", partial(builder.add_all, "Namespace"), partial(builder.forget, "Namespace")
                )
        except ListForbidden:
            builder.not_read("Namespace", NAMESPACES_FORBIDDEN)
        self._find_autoscaler(builder, "Lease")
        self._find_autoscaler(builder, "ConfigMap")
        return builder.build(now)

    def list_kind(
        self,
        kind: str,
        add: Callable[[list[dict[str, Any]]], None],
        again: Callable[[], None] = lambda: None,
    ) -> str:
        """Every object of `kind` (as `lists` asks for it), page by page into `add`; returns the
        list's resourceVersion, from which a watch picks up (the first page's: a real server serves
        every page at it, so watching from there misses nothing). ListForbidden on a 403. When a
        continue token expires (410), `again()` drops what `add` gathered and the list starts over
        (`restarting`, as client-go's pager)."""
        call, params = self.lists[kind]

        def listing() -> str:
            version = ""
            for items, meta in self._paged(kind, call, params):
                version = version or str(meta.get("resourceVersion") or "")
                add(items)
            return version

        return restarting(f"list {kind}s", listing, again)

    def _find_autoscaler(self, builder: StateBuilder, kind: str) -> None:
        """cluster-autoscaler's `kind` named as configured: one cluster-wide list with
        `fieldSelector=metadata.name=<name>`, which RBAC authorises by resourceNames (the API server
        takes an exact metadata.name selector as the request's name), so no right to read other
        Leases or ConfigMaps is needed; only those in `autoscaler_namespaces` count as evidence
        (kube/autoscaler.py), the rest are named in warnings. Where even that list is forbidden
        (RBAC of an older release), each configured namespace is asked by name, and the state says
        the look was narrow (a 403 there reads as absent)."""
        try:
            self.list_kind(kind, partial(builder.add_all, kind), partial(builder.forget, kind))
            return
        except ListForbidden:
            pass
        warning, found = self.autoscaler_where_configured(kind)
        builder.warnings.append(warning)
        builder.autoscaler_unchecked.append(warning)
        for raw in found:
            builder.add(kind, raw)

    def autoscaler_where_configured(self, kind: str) -> tuple[str, list[dict[str, Any]]]:
        """Where listing cluster-autoscaler's `kind` by name is forbidden: the warning that says so,
        and the objects of that name in the configured namespaces (those absent or not readable
        either left out)."""
        name = self.autoscaler_lease if kind == "Lease" else self.autoscaler_status
        get: Callable[..., Any] = (
            self.coordination.read_namespaced_lease
            if kind == "Lease"
            else self.core.read_namespaced_config_map
        )
        namespaces = ", ".join(self.autoscaler_namespaces)
        warning = (
            f"cluster-autoscaler looked for in {namespaces} only: list {kind}s named {name} in all "
            f"namespaces is forbidden (grant `list` on {kind.lower()}s with resourceNames [{name}], "
            "cluster-wide: docs/deploy-kubernetes.md)"
        )
        found = [self._get(kind, get, (namespace, name)) for namespace in self.autoscaler_namespaces]
        return warning, [raw for raw in found if raw is not None]

    def _fetch(self, kind: str, call: Callable[..., Any], params: dict[str, Any], token: str) -> bytes:
        try:
            response = with_retries(
                lambda: call(limit=self.page_size, _continue=token or None, _preload_content=False, **params)
            )
            data: bytes = response.data
            return data
        except ApiException as exc:
            if continue_expired(exc, token):
                raise ContinueExpired(kind) from None
            error = api_error(f"list {kind}s", exc)
            if exc.status == 403:
                raise ListForbidden(str(error)) from None
            raise error from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None

    def _paged(
        self, kind: str, call: Callable[..., Any], params: dict[str, Any]
    ) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
        """(items, the page's ListMeta) page by page; the next page is requested before this one
        is converted."""

        def fetch(token: str) -> _Prefetch[bytes]:
            return _Prefetch(lambda: self._fetch(kind, call, params, token))

        pending: _Prefetch[bytes] | None = fetch("")
        while pending is not None:
            body = pending.result()
            try:
                page = decode_list(kind, body)
            except msgspec.DecodeError as exc:
                raise KubernetesError(f"Kubernetes API: list {kind}s: unreadable reply: {exc}") from None
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            pending = fetch(token) if token else None
            yield page.get("items") or [], meta

    def _get(self, kind: str, call: Callable[..., Any], where: tuple[str, str]) -> dict[str, Any] | None:
        namespace, name = where
        try:
            response = with_retries(lambda: call(name, namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status in (403, 404):
                return None  # absent, or we may not read it: no evidence either way
            raise api_error(f"read {kind} {namespace}/{name}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None
        document: dict[str, Any] = orjson.loads(response.data)
        return document


def api_error(action: str, exc: ApiException) -> KubernetesError:
    if exc.status in (401, 403):
        return KubernetesError(
            f"Kubernetes API: {action}: {'unauthorized' if exc.status == 401 else 'forbidden'} "
            "(check the credentials and grant the RBAC rules of docs/deploy-kubernetes.md)"
        )
    reason = exc.reason or "error"
    return KubernetesError(f"Kubernetes API: {action}: HTTP {exc.status} {reason}")


def unreachable(api: k8s.ApiClient, exc: Exception) -> KubernetesError:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason).splitlines()[0]
    if timed_out(exc):
        ours = getattr(api, "request_timeout", None)  # kube.client.TimedApiClient's
        match = _TIMEOUT.search(text)
        seconds = float(match[1]) if match else ours
        setting = " (kubernetes.requestTimeout)" if seconds is not None and seconds == ours else ""
        cost = spent(exc)
        if seconds is None:
            text = "timed out"
        elif cost is not None and cost.tries > 1:  # the bound a person waited, retries included
            text = (
                f"timed out: no answer in {cost.tries} tries of {seconds:g}s each{setting}, "
                f"{cost.seconds:.0f}s in all"
            )
        else:
            text = f"timed out after {seconds:g}s{setting}"
    elif "Connection refused" in text or "NewConnectionError" in text:
        text = "connection refused"
    return KubernetesError(f"cannot reach the Kubernetes API at {api.configuration.host}: {text}")
