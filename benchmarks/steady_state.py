"""Steady state of the plan stage's cluster read (issue 20): what an idle plan cycle costs the API
server and the client, before (a full re-list every cycle, LiveReader.read, as `run` did) and after
(the watch-fed cache, kube/cache.py), at 5,000 nodes / 150,000 realistic pods in the fake API.

The fake API runs in its own process, loaded from JSONL (benchmarks/listing.py's objects); the
client is a fresh process measured from inside: API requests (every HTTP request line it sends),
bytes read from the API server (every byte its sockets read: headers, bodies, watch streams) and
client CPU (user + system of the whole process: prefetch and watch threads included).

- before: per cycle, LiveReader.read(now), what a plan cycle read before the cache.
- after: the cache lists once (its sync is printed, not counted per cycle), then IDLE_CYCLES idle
  cycles of `cache.state(now)`, the cluster read of a plan cycle in `run`, IDLE_INTERVAL apart; the
  watches run meanwhile, with the fake sending a BOOKMARK every second on each (a real API server
  sends one about every minute: the bytes here are an upper bound).
  Goals: no list request between resyncs; an idle cycle's CPU <= 5% of a full-list cycle's.
- soak: SOAK_CYCLES cycles, each changing one pod through the API (created, relabelled or deleted
  in turn, so events flow) and then reading `cache.state(now)`, with run.resyncInterval at
  SOAK_RESYNC so relists happen during the soak too. RSS after WARMUP cycles against the RSS at
  the end. Goal: growth < 10%. The planner is not run: what grows or not is the cache (the plan
  itself is the same code before and after; benchmarks/planner.py measures it).
- idle day (benchmarks/_idle_day.py): the split deployment, two `run` processes, with every cadence
  shrunk 300x, quiet and then with a scale-down proposal waiting for review; commits on main, the
  state branch, the notes and proposal branches, and bytes pushed, per day at the defaults, and Pod
  LISTs. Goal: no Git write while nothing happens.

    python benchmarks/steady_state.py [--pods N] [--nodes N] [--soak-cycles N] [--only cache|idle-day]
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

BEFORE_CYCLES = 2
IDLE_CYCLES, IDLE_INTERVAL = 20, 0.5
SOAK_CYCLES, WARMUP, SOAK_RESYNC = 2_000, 200, 30.0
TARGET_CPU_RATIO, TARGET_GROWTH = 0.05, 0.10


class Wire:
    """Counts what the process sends to and reads from sockets, by patching the stdlib classes
    urllib3 (and so the kubernetes client) goes through."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.lists = 0  # GETs of a collection that are not watches
        self.bytes = 0
        real_putrequest = http.client.HTTPConnection.putrequest
        real_readinto = socket.SocketIO.readinto
        wire = self

        def putrequest(conn: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            with wire.lock:
                wire.requests += 1
                if method == "GET" and "watch=" not in url and "/namespaces/" not in url.split("?")[0]:
                    wire.lists += 1
            return real_putrequest(conn, method, url, *args, **kwargs)

        def readinto(sock: Any, buffer: Any) -> int | None:
            count: int | None = real_readinto(sock, buffer)
            if count:
                with wire.lock:
                    wire.bytes += count
            return count

        http.client.HTTPConnection.putrequest = putrequest  # type: ignore[method-assign]
        socket.SocketIO.readinto = readinto  # type: ignore[method-assign]

    def snapshot(self) -> tuple[int, int, int, float]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with self.lock:
            return self.requests, self.lists, self.bytes, usage.ru_utime + usage.ru_stime


def _delta(after: tuple[int, int, int, float], before: tuple[int, int, int, float]) -> dict[str, float]:
    return {
        "requests": after[0] - before[0],
        "lists": after[1] - before[1],
        "bytes": after[2] - before[2],
        "cpu": after[3] - before[3],
    }


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(url: str, soak_cycles: int) -> None:
    """In a fresh process: the figures as JSON on the last line."""
    wire = Wire()
    from reconciler.kube.cache import ClusterCache
    from reconciler.kube.live import LiveReader
    from tests.support.kube import make_api_client

    api = make_api_client(url)
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 24  # a watch per kind, and lists
    figures: dict[str, Any] = {}

    # before: a full list per cycle (after one not counted: imports, decoders, the fake's caches)
    LiveReader(api, page_size=500).read(datetime.now(UTC))
    cycles = []
    for _ in range(BEFORE_CYCLES):
        start = wire.snapshot()
        state = LiveReader(api, page_size=500).read(datetime.now(UTC))
        cycles.append(_delta(wire.snapshot(), start))
    figures["before"] = {key: sum(c[key] for c in cycles) / len(cycles) for key in cycles[0]}
    figures["pods"], figures["nodes"] = len(state.pods), len(state.nodes)
    del state

    # after: list once, then idle cycles read the cache
    cache = ClusterCache(api, page_size=500, resync=600.0, request_timeout=60.0)
    start = wire.snapshot()
    began = time.perf_counter()
    cache.start()
    if not cache.wait_synced(600):
        raise SystemExit(f"the cache did not sync: {cache.waiting_for()}")
    figures["sync"] = {**_delta(wire.snapshot(), start), "seconds": time.perf_counter() - began}
    time.sleep(2.0)  # every watch open
    start = wire.snapshot()
    for _ in range(IDLE_CYCLES):
        cycle_began = time.monotonic()
        state = cache.state(datetime.now(UTC))
        time.sleep(max(0.0, IDLE_INTERVAL - (time.monotonic() - cycle_began)))
    idle = _delta(wire.snapshot(), start)
    figures["after"] = {key: value / IDLE_CYCLES for key, value in idle.items()}
    figures["after_lists_total"] = idle["lists"]
    assert len(state.pods) == figures["pods"]
    cache.stop()
    del state

    # soak: churn one pod per cycle and read the cache, relists included
    cache = ClusterCache(api, page_size=500, resync=SOAK_RESYNC, request_timeout=60.0)
    cache.start()
    if not cache.wait_synced(600):
        raise SystemExit(f"the cache did not sync: {cache.waiting_for()}")
    churn = _churn(url)
    rss_warm = 0
    began = time.perf_counter()
    for cycle in range(soak_cycles):
        churn(cycle)
        cache.state(datetime.now(UTC))
        if cycle + 1 == WARMUP:
            rss_warm = _rss()
    figures["soak"] = {
        "cycles": soak_cycles,
        "seconds": time.perf_counter() - began,
        "rss_warm": rss_warm,
        "rss_end": _rss(),
        "relists": sum(h.relists.get("resync", 0) for h in cache.health() if h.kind == "Pod"),
    }
    cache.stop()
    print(json.dumps(figures))


def _churn(url: str) -> Callable[[int], None]:
    """One pod change per call, through the API: create, relabel, delete, in turn."""
    from tests.support import k8s_objects as k

    def send(method: str, path: str, body: Any = None) -> None:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request) as reply:
            reply.read()

    def change(cycle: int) -> None:
        name = f"soak-{cycle // 3 % 50}"
        step = cycle % 3
        if step == 0:
            send("POST", "/api/v1/namespaces/ns-0/pods", k.realistic_pod(name, "ns-0", app="app-1"))
        elif step == 1:
            pod = k.realistic_pod(name, "ns-0", app="app-1", labels={"soak": str(cycle % 7)})
            send("PUT", f"/api/v1/namespaces/ns-0/pods/{name}", pod)
        else:
            send("DELETE", f"/api/v1/namespaces/ns-0/pods/{name}")

    return change


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--soak-cycles", type=int, default=SOAK_CYCLES)
    parser.add_argument("--only", choices=("cache", "idle-day"), help="one part: the cache's or the idle day")
    parser.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.soak_cycles)
        return 0
    ok = True
    if args.only != "idle-day":
        ok = cache(args) and ok
    if args.only != "cache":
        from _idle_day import idle_day

        ok = idle_day() and ok
    print("steady_state: " + ("met targets" if ok else "MISSED targets"))
    return 0 if ok else 1


def cache(args: argparse.Namespace) -> bool:
    """The cluster read's figures (before, after, sync, soak); True when they meet their goals."""
    from listing import generate

    from reconciler.demo.kube_api import serve_in_subprocess

    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "objects.jsonl"
        started = time.perf_counter()
        count = generate(jsonl, args.pods, args.nodes)
        print(f"generated {count} objects in {time.perf_counter() - started:.1f}s", flush=True)
        with serve_in_subprocess(jsonl, options=["--bookmark-interval", "1"]) as (url, _server):
            result = subprocess.run(
                [sys.executable, __file__, "--measure", url, "--soak-cycles", str(args.soak_cycles)],
                check=False,
                capture_output=True,
                text=True,
            )
    if result.returncode != 0:
        print(result.stdout[-3000:], result.stderr[-3000:], sep="\n")
        return False
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    before, after, sync, soak = figures["before"], figures["after"], figures["sync"], figures["soak"]
    print(f"cluster: {figures['nodes']} nodes, {figures['pods']} pods")

    def row(label: str, f: dict[str, float]) -> str:
        return (
            f"  {label:<34} {f['requests']:>8.1f} requests {f['bytes'] / 2**20:>10.3f} MiB read "
            f"{f['cpu']:>8.3f} s CPU"
        )

    print("per idle plan cycle (the cluster read):")
    print(row("before: a full list every cycle", before))
    print(row(f"after: the watch-fed cache ({IDLE_CYCLES} cycles)", after))
    print(
        f"  after: {after['bytes']:.0f} bytes/cycle (bookmarks every 1s on 9 watches; a real API server "
        "sends one a minute)"
    )
    print(row("the cache's one list at start", sync) + f" in {sync['seconds']:.1f}s")
    print(
        "  besides: each of the 9 watches is opened again when the server ends it (every 300s: 0.9 "
        "requests per 30s cycle), and every kind is listed again at run.resyncInterval (10m)"
    )
    ratio = after["cpu"] / before["cpu"] if before["cpu"] else 0.0
    print(
        f"idle cycle CPU / full-list cycle CPU = {ratio:.2%} (goal <= {TARGET_CPU_RATIO:.0%}); "
        f"lists between resyncs: {figures['after_lists_total']:.0f} (goal 0)"
    )
    growth = soak["rss_end"] / soak["rss_warm"] - 1 if soak["rss_warm"] else 0.0
    print(
        f"soak: {soak['cycles']} cycles in {soak['seconds']:.0f}s (one pod changed per cycle, "
        f"{soak['relists']} resyncs of the pods), RSS {soak['rss_warm'] / 2**20:.0f} MiB after {WARMUP} "
        f"-> {soak['rss_end'] / 2**20:.0f} MiB = {growth:+.1%} (goal < {TARGET_GROWTH:.0%})"
    )
    return ratio <= TARGET_CPU_RATIO and figures["after_lists_total"] == 0 and growth < TARGET_GROWTH


if __name__ == "__main__":
    sys.exit(main())
