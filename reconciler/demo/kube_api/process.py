"""Serving the fake API in a separate process (`python -m reconciler.demo.kube_api`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from reconciler.demo.kube_api.api import FakeKubeAPI

# ------------------------------------------------------------------------- separate process


@contextlib.contextmanager
def serve_in_subprocess(
    jsonl_path: str | Path | None = None, *, startup_timeout: float = 300.0, options: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run the fake in its own process (so a benchmark's client has a core and GIL to itself),
    loaded from a JSONL file; yields (url, process) once it serves, and stops it on exit.
    `options`: more of main()'s flags (e.g. --bookmark-interval)."""
    root = Path(__file__).resolve().parents[2]
    tmp = Path(tempfile.mkdtemp(prefix="fake-kube-api-"))
    port_file = tmp / "url"
    log = (tmp / "stderr").open("wb")
    cmd = [sys.executable, "-m", "reconciler.demo.kube_api", "--port-file", str(port_file)]
    if jsonl_path is not None:
        cmd += ["--objects", str(jsonl_path)]
    cmd += list(options)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    )
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + startup_timeout
        while not port_file.exists():
            if proc.poll() is not None:
                log.flush()
                raise RuntimeError(
                    f"fake kube API exited ({proc.returncode}): "
                    f"{(tmp / 'stderr').read_text(errors='replace')[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError("fake kube API did not start in time")
            time.sleep(0.02)
        yield port_file.read_text().strip(), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.demo.kube_api", description="Serve the fake Kubernetes API."
    )
    parser.add_argument("--objects", action="append", default=[], help="JSONL file, one object per line")
    parser.add_argument("--port-file", help="write the URL here once serving")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record-requests", action="store_true", help="keep a log of every request")
    parser.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between BOOKMARKs")
    args = parser.parse_args(argv)
    api = FakeKubeAPI(args.host, args.port)
    api.record_requests = args.record_requests
    api.bookmark_interval = args.bookmark_interval
    for path in args.objects:
        api.load_jsonl(path)
    with api._lock:  # sort once now rather than on the first list
        for store in api._stores.values():
            store.keys()
    api.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        Path(tmp).write_text(api.url + "\n")
        os.replace(tmp, args.port_file)
    else:
        print(api.url, flush=True)
    while not stop.wait(1.0):
        pass
    api.stop()
    return 0
