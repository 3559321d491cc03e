"""The HTTP layer: a threading server whose handler turns requests into API calls and streams watches."""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import orjson

from reconciler.demo.kube_api.errors import _REASONS, ApiError, status_body
from reconciler.demo.kube_api.types import DROP
from reconciler.demo.kube_api.wire import _Watch

# ------------------------------------------------------------------------------------ HTTP layer

if TYPE_CHECKING:  # the server serves an API that starts it: only a type here
    from reconciler.demo.kube_api.api import FakeKubeAPI


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: FakeKubeAPI) -> None:
        self.api = api
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client hung up: not worth a traceback
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive with Content-Length; watches use chunked transfer encoding."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every keep-alive round trip waits ~40 ms for delayed ACK
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.api._stats_lock:
            self.server.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.api._stats_lock:
            self.server.api._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        api = self.server.api
        body = self._read_body()
        split = urlsplit(self.path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        api._record(method, path, query, self.headers.items(), body)
        fault = api.fault
        if fault is not None:
            outcome = fault(method, path, query)
            if outcome == DROP:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(outcome, int | float) and not isinstance(outcome, bool):
                time.sleep(outcome)
            elif isinstance(outcome, tuple):
                code, payload = outcome
                if payload is None:
                    payload = status_body(code, _REASONS.get(code, "Unknown"), f"injected fault {code}")
                self._send(code, orjson.dumps(payload))
                return
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            result = api.handle(method, path, query, body, content_type)
            if isinstance(result, _Watch):
                self._stream_watch(result)
                return
            self._send(result.code, result.body)
        except ApiError as e:
            self._send(e.code, orjson.dumps(e.status()))
        except Exception as e:  # a bug in the fake: answer like the apiserver would, keep serving
            self._send(500, orjson.dumps(status_body(500, "InternalError", f"fake API error: {e!r}")))

    def _send(self, code: int, body: bytes | list[bytes], content_type: str = "application/json") -> None:
        length = len(body) if isinstance(body, bytes) else sum(map(len, body))
        head = (
            f"HTTP/1.1 {code} {_phrase(code)}\r\nContent-Type: {content_type}\r\n"
            f"Cache-Control: no-cache, private\r\nContent-Length: {length}\r\n\r\n"
        ).encode()
        try:
            if isinstance(body, bytes):
                self.wfile.write(head + body)
            else:
                _send_all(self.connection, [head, *body])
        except OSError:
            self.close_connection = True

    def _stream_watch(self, w: _Watch) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )

        def write(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            self.wfile.write(head)
            try:
                self.server.api.serve_watch(w, write)
            except ApiError as e:
                write(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(e.status()))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


def _send_all(sock: socket.socket, parts: list[bytes | memoryview]) -> None:
    """sendall() for a list of buffers via sendmsg, at most 512 per call (IOV_MAX is 1024).
    Consumes `parts`; only a partially sent buffer gets a memoryview."""
    i, n = 0, len(parts)
    while i < n:
        batch = parts[i : i + 512]
        sent = sock.sendmsg(batch)
        for part in batch:
            size = len(part)
            if sent < size:
                parts[i] = memoryview(part)[sent:]
                break
            sent -= size
            i += 1


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"
