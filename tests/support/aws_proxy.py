"""A slow link in front of the moto server: every request is forwarded as it is, and the answer to
one chosen action (say SetDesiredCapacity) is held back after moto has acted on it — the moment a
process is worst interrupted in: AWS did it, the caller does not know yet. Tests send a real signal
to a real process then (`held` says when)."""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlowAnswers:
    def __init__(self, upstream: str, action: str, delay: float) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.action, self.delay = action, delay
        self.held = threading.Event()  # set once moto acted on `action` and its answer waits
        self.calls: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target", "")
                named = proxy.action in target or f"Action={proxy.action}".encode() in body
                connection = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=60
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
                connection.close()
                if named:
                    proxy.calls.append(proxy.action)
                    proxy.held.set()
                    time.sleep(proxy.delay)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def slow_answers(upstream: str, action: str, delay: float) -> Iterator[SlowAnswers]:
    proxy = SlowAnswers(upstream, action, delay)
    thread = threading.Thread(target=proxy.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
