"""Writes as the real server makes them: create, update, patch, delete (graceful), collections and
the eviction subresource."""

from __future__ import annotations

import secrets
import threading
import uuid
from typing import Any

import orjson

from reconciler.demo.kube_api import validation
from reconciler.demo.kube_api.core import _Core, _View
from reconciler.demo.kube_api.errors import ApiError, _conflict, _details, _not_found, _qualified
from reconciler.demo.kube_api.eviction import evict
from reconciler.demo.kube_api.patches import json_patch, merge_patch, strategic_merge_patch
from reconciler.demo.kube_api.resources import Resource, _now
from reconciler.demo.kube_api.storage import _Entry, _key
from reconciler.demo.kube_api.store_view import Refusal
from reconciler.demo.kube_api.types import Obj, Query
from reconciler.demo.kube_api.wire import (
    _check_micro_times,
    _check_quantities,
    _dry_run,
    _int_param,
    _json,
    _json_or_yaml,
    _Reply,
)


class _Writes(_Core):
    # ------------------------------------------------------------------ writes

    def _create(self, res: Resource, namespace: str, obj: Any, query: Query) -> _Reply:
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        _check_micro_times(res, obj)
        _check_quantities(res, obj)
        if obj.get("kind") not in (None, res.kind):
            raise ApiError(400, "BadRequest", f"the kind {obj.get('kind')!r} does not match {res.kind!r}")
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if res.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        if meta.get("resourceVersion"):
            raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"{res.kind} is invalid: metadata.name: Required value: name or generateName is required",
                )
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        name = meta["name"]
        self._refuse_invalid(res, obj, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta.pop("deletionTimestamp", None)
        if "spec" in obj and res.kind not in ("Pod", "Node"):
            meta.setdefault("generation", 1)
        with self._cond:
            store = self._stores[res.kind]
            if _key(namespace, name) in store.entries:
                raise ApiError(
                    409, "AlreadyExists", f'{_qualified(res)} "{name}" already exists', _details(res, name)
                )
            if _dry_run(query):
                obj["kind"], obj["apiVersion"] = res.kind, res.api_version
                return _Reply(201, orjson.dumps(obj))
            entry = self._commit(res, obj)
            self._cond.notify_all()
            return _Reply(201, self._full(res, entry))

    def _update(
        self, res: Resource, ns: str, name: str, obj: Any, query: Query, *, status_only: bool
    ) -> _Reply:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        meta = obj.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if entry is None:
                raise _not_found(res, name)
            rv = meta.get("resourceVersion")
            if rv and rv != str(entry.rv):
                raise _conflict(res, name)
            return self._write(res, entry, obj, query, status_only=status_only)

    def _patch(
        self,
        res: Resource,
        ns: str,
        name: str,
        body: bytes,
        content_type: str,
        query: Query,
        *,
        status_only: bool,
    ) -> _Reply:
        patch = _json(body) if not content_type.startswith("application/apply-patch") else _json_or_yaml(body)
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if content_type.startswith("application/apply-patch"):
                if not query.get("fieldManager"):
                    raise ApiError(
                        400, "BadRequest", "PATCH requests with apply content type require fieldManager"
                    )
                if entry is None:
                    if not isinstance(patch, dict):
                        raise ApiError(400, "BadRequest", "apply patch must be an object")
                    meta = patch.setdefault("metadata", {})
                    meta.setdefault("name", name)
                    return self._create(res, ns, patch, query)
                current = self._decode(res, entry)
                patched = merge_patch(current, patch)
            else:
                if entry is None:
                    raise _not_found(res, name)
                current = self._decode(res, entry)
                if content_type == "application/json-patch+json":
                    if not isinstance(patch, list):
                        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
                    patched = json_patch(current, patch)
                elif content_type == "application/merge-patch+json":
                    patched = merge_patch(current, patch)
                elif content_type == "application/strategic-merge-patch+json":
                    if res.kind not in (
                        "Pod",
                        "Node",
                        "ConfigMap",
                        "Event",
                        "Namespace",
                        "PersistentVolume",
                        "PersistentVolumeClaim",
                        "DaemonSet",
                        "ReplicaSet",
                        "Deployment",
                        "StatefulSet",
                        "PodDisruptionBudget",
                        "Lease",
                    ):
                        raise ApiError(415, "UnsupportedMediaType", "strategic merge patch is not supported")
                    patched = strategic_merge_patch(current, patch)
                else:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml, application/strategic-merge-patch+json",
                    )
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise ApiError(422, "Invalid", "the patch produced an invalid object")
            rv = patched["metadata"].get("resourceVersion")
            if rv and rv != str(entry.rv):
                raise _conflict(res, name)
            return self._write(res, entry, patched, query, status_only=status_only)

    def _write(self, res: Resource, entry: _Entry, new: Obj, query: Query, *, status_only: bool) -> _Reply:
        """Finish an update or patch: keep identity fields, honour the status subresource split,
        skip no-op writes (no new resourceVersion, as the real server)."""
        _check_micro_times(res, new)
        _check_quantities(res, new)
        current = self._decode(res, entry)
        if res.has_status:
            if status_only:
                merged = dict(current)
                if "status" in new:
                    merged["status"] = new["status"]
                new = merged
            elif "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        meta = new["metadata"]
        cur_meta = current["metadata"]
        for k in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if k in cur_meta:
                meta[k] = cur_meta[k]
            else:
                meta.pop(k, None)
        meta["resourceVersion"] = cur_meta.get("resourceVersion")
        new["kind"], new["apiVersion"] = res.kind, res.api_version
        if "generation" in cur_meta and not status_only and new.get("spec") != current.get("spec"):
            meta["generation"] = int(cur_meta["generation"]) + 1
        self._refuse_invalid(res, new, str(meta.get("name", "")))
        if new == current:
            return _Reply(200, self._full(res, entry))
        if _dry_run(query):
            return _Reply(200, orjson.dumps(new))
        committed = self._commit(res, new)
        self._cond.notify_all()
        return _Reply(200, self._full(res, committed))

    def _delete(self, res: Resource, ns: str, name: str, options: Any, query: Query) -> _Reply:
        opts = options if isinstance(options, dict) else {}
        pre = opts.get("preconditions") or {}
        grace = opts.get("gracePeriodSeconds", _int_param(query, "gracePeriodSeconds", -1))
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if entry is None:
                raise _not_found(res, name)
            current = self._decode(res, entry)
            meta = current["metadata"]
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                    f"object meta: {meta.get('uid')}",
                    _details(res, name),
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                    _details(res, name),
                )
            if _dry_run(query):
                return _Reply(200, self._full(res, entry))
            reply = self._delete_entry(res, entry, current, grace)
            self._cond.notify_all()
            return reply

    def _delete_entry(self, res: Resource, entry: _Entry, current: Obj, grace: int | None = -1) -> _Reply:
        """Delete now, or for a pod on a node with `pod_termination_seconds`, mark it terminating
        and delete it when it stops: after `pod_termination_seconds` or the grace period asked for
        (`grace` > 0), whichever is shorter."""
        meta = current["metadata"]
        delay = self.pod_termination_seconds
        if isinstance(grace, int) and grace > 0:
            delay = min(delay, float(grace))
        graceful = res.kind == "Pod" and delay > 0 and grace != 0 and current.get("spec", {}).get("nodeName")
        if graceful:
            if "deletionTimestamp" in meta:
                return _Reply(200, self._full(res, entry))
            meta["deletionTimestamp"] = _now()
            meta["deletionGracePeriodSeconds"] = int(grace if grace is not None and grace > 0 else 30)
            committed = self._commit(res, current)
            if delay != float("inf"):
                timer = threading.Timer(delay, self._finish_termination, (res, entry.key, meta["uid"]))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            return _Reply(200, self._full(res, committed))
        final = self._remove(res, entry)
        if res.kind == "Pod":
            return _Reply(200, self._full(res, final))
        return _Reply(
            200,
            orjson.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": _details(res, entry.name, uid=meta.get("uid")),
                }
            ),
        )

    def _finish_termination(self, res: Resource, key: str, uid: str) -> None:
        with self._cond:
            entry = self._stores[res.kind].entries.get(key)
            if entry is not None and self._decode(res, entry)["metadata"].get("uid") == uid:
                self._remove(res, entry)
                self._cond.notify_all()

    def _delete_collection(self, res: Resource, namespace: str | None, query: Query) -> _Reply:
        pred = self._predicate(res, query)
        with self._cond:
            store = self._stores[res.kind]
            lo, hi = store.key_range(namespace)
            victims = [store.entries[k] for k in store.keys()[lo:hi]]
            victims = [e for e in victims if pred is None or pred(e)]
            items = []
            if not _dry_run(query):
                for e in victims:
                    items.append(self._remove(res, e).raw)
                self._cond.notify_all()
            rv = self._rv
        return _Reply(
            200,
            b'{"kind":"%sList","apiVersion":"%s","metadata":{"resourceVersion":"%d"},"items":[%s]}'
            % (res.kind.encode(), res.api_version.encode(), rv, b",".join(items)),
        )

    # ------------------------------------------------------------------ eviction

    def _evict(self, ns: str, name: str, body: Any, query: Query) -> _Reply:
        """policy/v1 Eviction, as the real server carries it out (eviction.py); a body
        that breaks the official schema is refused first (validation.py)."""
        if self.validate_writes and isinstance(body, dict):
            problems = validation.schema_problems({"kind": "Eviction", "apiVersion": "policy/v1", **body})
            if problems:
                raise ApiError(422, "Invalid", f'Eviction.policy "{name}" is invalid: {"; ".join(problems)}')
        with self._cond:
            try:
                code, status = evict(
                    _View(self), ns, name, body, dry_run=_dry_run(query), fault=self.eviction_fault
                )
            except Refusal as r:
                raise ApiError(r.code, r.reason, r.message, r.details) from None
            self._cond.notify_all()
        return _Reply(code, orjson.dumps(status))
