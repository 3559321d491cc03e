"""The `run` loop's HTTP endpoint on `run.metricsAddress`: /metrics, /healthz and /readyz.

/metrics is prometheus_client's own WSGI app, so the text format, OpenMetrics negotiation (the
Accept header Prometheus sends), gzip and `name[]` filtering come with it. /healthz turns red when a
stage stops making progress — a hung API call, a deadlock — so the kubelet restarts the pod; it stays
green while a stage fails and retries (that is a metric and an alert, not a reason to restart).
/readyz is green once every stage finished its first cycle (or, as a follower, knows its leader),
and, while this replica leads the plan stage, its watch-fed cluster cache has listed every kind.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIEnvironment

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from reconciler.domain.errors import UserError
from reconciler.telemetry.metrics import Metrics

_log = logging.getLogger(__name__)

KEY = "run.metricsAddress"
_FIX = 'use ":8085" (every interface), "127.0.0.1:8085", "[::1]:8085", or "" for no server'


class Health:
    """Liveness and readiness of the loop's stages, from heartbeats the loop sends.

    A stage counts as stalled when it made no progress for longer than `stall_after(stage)` seconds
    (the loop passes 3 × its interval plus the current backoff, so a stage that is failing and
    backing off is not a stall). The clock starts at construction: a stage that never reports stalls
    too. Thread-safe: stages report from their own threads.
    """

    def __init__(
        self,
        stages: Iterable[str],
        stall_after: Callable[[str], float],
        clock: Callable[[], float] = time.monotonic,
        waiting: Callable[[], str] = lambda: "",
    ) -> None:
        """`waiting()`: what else readiness waits for ("" for nothing): the plan leader's cache."""
        self._stall_after = stall_after
        self._clock = clock
        self._waiting = waiting
        self._lock = threading.Lock()
        start = clock()
        self._last: dict[str, float] = dict.fromkeys(stages, start)
        self._ready: dict[str, bool] = dict.fromkeys(self._last, False)

    def progress(self, stage: str) -> None:
        """A heartbeat: a cycle finished, idle waiting, a drain look, waiting as a follower."""
        now = self._clock()
        with self._lock:
            self._last[stage] = now
            self._ready.setdefault(stage, False)

    def ready(self, stage: str) -> None:
        """The stage finished its first cycle (or is a follower that knows its leader)."""
        now = self._clock()
        with self._lock:
            self._ready[stage] = True
            self._last.setdefault(stage, now)

    def healthy(self) -> tuple[bool, str]:
        """False, naming the stalled stages, when any stage made no progress within stall_after."""
        now = self._clock()
        with self._lock:
            last = dict(self._last)
        stalled = []
        for stage, seen in sorted(last.items()):
            limit = self._stall_after(stage)
            quiet = now - seen
            if quiet > limit:
                stalled.append(f"stage {stage} made no progress for {quiet:.0f}s (stall after {limit:.0f}s)")
        return (False, "; ".join(stalled)) if stalled else (True, "ok")

    def is_ready(self) -> tuple[bool, str]:
        with self._lock:
            waiting = sorted(stage for stage, done in self._ready.items() if not done)
        reasons = [other] if (other := self._waiting()) else []
        if waiting:
            reasons.append("the first cycle of " + ", ".join(waiting))
        return (False, "not ready: waiting for " + "; ".join(reasons)) if reasons else (True, "ok")


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` (`:port` for every interface, `[v6]:port`) as (host, port); UserError otherwise."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(f"{KEY}: {address!r} is not host:port ({_FIX})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise UserError(f"{KEY}: {address!r}: write an IPv6 address in brackets, as [::1]:8085")
    return host, int(port_text)


class _QuietHandler(WSGIRequestHandler):
    """Scrapes and probes every few seconds are not worth a stderr line each."""

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("telemetry: " + format, *args)


class TelemetryServer:
    """Serves `metrics` and `health` on `address` from a daemon thread; "" serves nothing."""

    def __init__(self, address: str, metrics: Metrics, health: Health) -> None:
        self.address = address
        self.metrics = metrics
        self.health = health
        self._where = parse_address(address) if address else None
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self._where is not None

    @property
    def port(self) -> int:
        """The port listened on (the one picked when the address said :0); 0 when not serving."""
        return int(self._server.server_address[1]) if self._server is not None else 0

    def start(self) -> None:
        """Bind and serve. UserError naming run.metricsAddress when the address cannot be listened on."""
        if self._where is None or self._server is not None:
            return
        host, port = self._where
        try:
            server = make_server(host, port, self._app, _server_class(host, port), _QuietHandler)
        except OSError as exc:
            raise UserError(_bind_error(self.address, host, port, exc)) from None
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="telemetry", daemon=True)
        self._thread.start()
        _log.info("telemetry: serving /metrics, /healthz and /readyz on %s", self.address)

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body: Iterable[bytes] = self._metrics_app(environ, start_response)
            return body
        if path in ("/healthz", "/readyz"):
            ok, reason = self.health.healthy() if path == "/healthz" else self.health.is_ready()
            return _text(start_response, "200 OK" if ok else "503 Service Unavailable", reason)
        return _text(start_response, "404 Not Found", "not found: try /metrics, /healthz or /readyz")


def _text(start_response: StartResponse, status: str, text: str) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(
        status,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [body]


def _server_class(host: str, port: int) -> type[WSGIServer]:
    """A threading server of the address family `host` resolves to (IPv6 needs its own family)."""
    family = socket.AF_INET
    if host:
        # unresolvable: binding then fails with the resolver's message, reported naming the host
        with contextlib.suppress(socket.gaierror):
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family
        daemon_threads = True

    return Server


def _bind_error(address: str, host: str, port: int, exc: OSError) -> str:
    shown = f"{KEY} {address!r}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{shown}: port {port} is already in use on {host or 'this machine'} (another process "
            f'listens there): pick a free port, or "" to run without the server'
        )
    if exc.errno == errno.EACCES:
        return f"{shown}: not allowed to listen on port {port} (ports below 1024 need privileges): use 8085"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return f"{shown}: {host} is not an address of this machine ({exc.strerror or exc}): {_FIX}"
    return f"{shown}: cannot listen there ({exc.strerror or exc}): {_FIX}"
