"""Watches: events streamed from a resourceVersion, bookmarks, and 410 when it is too old."""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from reconciler.demo.kube_api.core import _Core
from reconciler.demo.kube_api.errors import ApiError, status_body
from reconciler.demo.kube_api.storage import _Entry
from reconciler.demo.kube_api.wire import _Watch


class _Watches(_Core):
    # ------------------------------------------------------------------ watch

    def serve_watch(self, w: _Watch, write: Callable[[bytes], None]) -> None:
        """Stream watch events as JSON lines (one chunk per batch) until timeoutSeconds, reset or stop.

        No resourceVersion (or "0") starts with ADDED for every current object, as the real server;
        a resourceVersion older than the retained events gets an ERROR event with a 410 Status, and so
        does a watch that fell behind: its next events trimmed from the log while it was writing.
        With allowWatchBookmarks, a BOOKMARK carries the newest resourceVersion every
        `bookmark_interval` seconds and as the timeout ends.
        """
        res = w.res
        timeout = float(w.query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = w.query.get("allowWatchBookmarks") in ("true", "1")
        next_bookmark = time.monotonic() + self.bookmark_interval
        pred = self._predicate(res, w.query)
        ns = w.namespace

        def matches(e: _Entry | None) -> bool:
            return e is not None and (ns is None or e.namespace == ns) and (pred is None or pred(e))

        def line(type_: str, e: _Entry) -> bytes:
            return b'{"type":"%s","object":%s}\n' % (type_.encode(), self._full(res, e))

        rv_param = w.query.get("resourceVersion", "")
        with self._lock:
            store = self._stores[res.kind]
            epoch = self._epoch
            initial: list[bytes] = []
            if rv_param in ("", "0"):
                lo, hi = store.key_range(ns)
                initial = [
                    line("ADDED", store.entries[k]) for k in store.keys()[lo:hi] if matches(store.entries[k])
                ]
                since = self._rv
            else:
                try:
                    since = int(rv_param)
                except ValueError:
                    raise ApiError(400, "BadRequest", f"invalid resource version {rv_param!r}") from None
                if since < store.floor_rv:
                    gone = status_body(
                        410, "Expired", f"too old resource version: {since} ({store.floor_rv})"
                    )
                    write(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(gone))
                    return
        for i in range(0, len(initial), 256):
            write(b"".join(initial[i : i + 256]))

        def bookmark(rv: int) -> bytes:
            meta = orjson.dumps({"resourceVersion": str(rv)})
            return b'{"type":"BOOKMARK","object":{"kind":"%s","apiVersion":"%s","metadata":%s}}\n' % (
                res.kind.encode(),
                res.api_version.encode(),
                meta,
            )

        while True:
            mark = b""
            with self._cond:
                while True:
                    if self._epoch != epoch:
                        return
                    store = self._stores[res.kind]
                    if since < store.floor_rv:
                        # fell behind while writing: its next events were trimmed from the log. The
                        # real watch cache ends a watcher that cannot keep up and the resume is 410;
                        # skipping to the oldest kept event would lose every event in between
                        gone = status_body(
                            410, "Expired", f"too old resource version: {since} ({store.floor_rv})"
                        )
                        mark = b'{"type":"ERROR","object":%s}\n' % orjson.dumps(gone)
                        break
                    events = store.events_after(since)
                    if events:
                        break
                    now = time.monotonic()
                    remaining = deadline - now
                    # every event of this kind up to the newest revision has been sent: it is safe
                    # to resume from
                    if bookmarks and (remaining <= 0 or now >= next_bookmark):
                        since = max(since, self._rv)
                        mark = bookmark(since)
                        next_bookmark = now + self.bookmark_interval
                        break
                    if remaining <= 0:
                        return
                    wait = min(remaining, next_bookmark - now) if bookmarks else remaining
                    self._cond.wait(max(wait, 0.0))
            if mark:
                write(mark)
                if mark.startswith(b'{"type":"ERROR"') or deadline - time.monotonic() <= 0:
                    return
                continue
            out = []
            for ev in events:
                if ev.type == "MODIFIED":
                    now, before = matches(ev.entry), matches(ev.prev)
                    if now:
                        out.append(line("MODIFIED" if before else "ADDED", ev.entry))
                    elif before:
                        out.append(line("DELETED", ev.entry))
                elif matches(ev.entry):
                    out.append(line(ev.type, ev.entry))
            since = events[-1].rv
            if out:
                write(b"".join(out))
