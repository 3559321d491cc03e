"""FakeKubeAPI: request handling and lists on top of the store, writes and watches."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import Self
from urllib.parse import unquote

import orjson

from reconciler.demo.kube_api.errors import _INCONSISTENT_CONTINUE, ApiError, _not_found
from reconciler.demo.kube_api.http import _Server
from reconciler.demo.kube_api.resources import _BY_ROUTE, _GROUPS, RESOURCES, Resource
from reconciler.demo.kube_api.storage import _key, _page_at
from reconciler.demo.kube_api.types import Obj, Query
from reconciler.demo.kube_api.watches import _Watches
from reconciler.demo.kube_api.wire import (
    _VERSION,
    RecordedRequest,
    _api_group,
    _decode_continue,
    _encode_continue,
    _group_list,
    _int_param,
    _json,
    _Reply,
    _resource_list,
    _Watch,
)
from reconciler.demo.kube_api.writes import _Writes


class FakeKubeAPI(_Writes, _Watches):
    """The fake server and its store. Thread-safe; one lock guards every read and write."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        """Bind (port 0 picks a free port) and serve in a daemon thread."""
        self._server = _Server((self._host, self._port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-kube-api",
            daemon=True,
        )
        self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start() if self._server is None else self

    # ------------------------------------------------------------------ request handling

    def _record(
        self, method: str, path: str, query: Query, headers: Iterable[tuple[str, str]], body: bytes = b""
    ) -> None:
        with self._stats_lock:
            self.calls[(method, path)] += 1
            if self.record_requests:
                lowered = {k.lower(): v for k, v in headers}
                self.requests.append(RecordedRequest(method, path, query, lowered, body))

    def handle(self, method: str, path: str, query: Query, body: bytes, content_type: str) -> _Reply | _Watch:
        """Route one request; raises ApiError for failures answered as Status objects."""
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        if not parts:
            return _Reply(200, orjson.dumps({"paths": ["/api", "/api/v1", "/apis", "/version"]}))
        if parts == ["version"]:
            return _Reply(200, orjson.dumps(_VERSION))
        if parts[0] in ("healthz", "readyz", "livez"):
            return _Reply(200, b"ok")
        if parts[0] == "api":
            if len(parts) == 1:
                return _Reply(200, orjson.dumps(self._api_versions()))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _Reply(200, orjson.dumps(_group_list()))
            if len(parts) == 2:
                if parts[1] not in _GROUPS:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return _Reply(200, orjson.dumps(_api_group(parts[1])))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if method != "GET" or not any(r.group == group and r.version == version for r in RESOURCES):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _Reply(200, orjson.dumps(_resource_list(group, version)))

        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        res = _BY_ROUTE.get((group, version, rest[0]))
        if res is None or (namespace is not None and not res.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if name is not None and res.namespaced and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None and sub not in ("status", "eviction"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "eviction" and res.kind != "Pod":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    self._predicate(res, query)  # a bad selector is a 400, before the stream starts
                    if query.get("resourceVersion", "") not in ("", "0"):
                        _int_param(query, "resourceVersion")
                    return _Watch(res, namespace, query)
                return _Reply(200, self._list(res, namespace, query))
            if method == "POST":
                if res.namespaced and namespace is None:
                    raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
                return self._create(res, namespace or "", _json(body), query)
            if method == "DELETE":
                return self._delete_collection(res, namespace, query)
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        ns = namespace or ""
        if sub == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            return self._evict(ns, name, _json(body), query)
        if method == "GET":
            with self._lock:
                entry = self._stores[res.kind].entries.get(_key(ns, name))
                if entry is None:
                    raise _not_found(res, name)
                return _Reply(200, self._full(res, entry))
        if method == "PUT":
            return self._update(res, ns, name, _json(body), query, status_only=sub == "status")
        if method == "PATCH":
            return self._patch(res, ns, name, body, content_type, query, status_only=sub == "status")
        if method == "DELETE" and sub is None:
            return self._delete(res, ns, name, _json(body) if body.strip() else {}, query)
        raise ApiError(
            405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
        )

    def _api_versions(self) -> Obj:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self._host}:{self.port}"}
            ],
        }

    # ------------------------------------------------------------------ list

    def _list(self, res: Resource, namespace: str | None, query: Query) -> list[bytes]:
        """One page. The first is served at the latest revision; every later one at the revision
        its continue token carries (the first page's), as etcd serves one consistent snapshot. A
        token from before a compaction is 410 Expired; one with revision -1 (the Expired answer's
        own) goes on at the latest."""
        limit = _int_param(query, "limit")
        pred = self._predicate(res, query)
        start_key, at = _decode_continue(query["continue"], res) if query.get("continue") else (None, -1)
        more, remaining = False, None
        last = ""
        with self._lock:
            store = self._stores[res.kind]
            if at != -1 and at < store.floor_rv:
                token = _encode_continue(res, start_key or "", -1)
                raise ApiError(410, "Expired", _INCONSISTENT_CONTINUE, list_meta={"continue": token})
            rv = self._rv if at == -1 else at
            changed = store.state_at(at) if at != -1 else {}
            keys = store.keys()
            lo, hi = store.key_range(namespace)
            if start_key is not None:
                lo = max(lo, bisect.bisect_right(keys, start_key))
            entries = store.entries
            if changed:
                items, more, last = _page_at(store, namespace, start_key, lo, hi, changed, limit, pred)
                if more and pred is None:
                    remaining = store.count_at(namespace, last, hi, changed)
            elif pred is None:
                end = hi if limit <= 0 else min(hi, lo + limit)
                items = [entries[k].raw for k in keys[lo:end]]
                if end < hi:
                    more, last, remaining = True, keys[end - 1], hi - end
            else:
                items = []
                for i in range(lo, hi):
                    e = entries[keys[i]]
                    if pred(e):
                        if 0 < limit == len(items):
                            more = True
                            break
                        items.append(e.raw)
                        last = e.key
        meta: Obj = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = _encode_continue(res, last, rv)
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        # Chunks, not one joined body: joining a 2 MB page costs more (fresh pages to fault in) than
        # the kernel's own copy of the chunks from sendmsg.
        parts = [
            b'{"kind":"%sList","apiVersion":"%s","metadata":%s,"items":['
            % (res.kind.encode(), res.api_version.encode(), orjson.dumps(meta))
        ]
        for item in items:
            parts.append(item)
            parts.append(b",")
        if items:
            parts.pop()
        parts.append(b"]}")
        return parts
