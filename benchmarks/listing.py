"""Listing benchmark (issue 2): 150,000 realistic pods (~4 KB of JSON each) and 5,000 nodes listed
from the fake API, over HTTP, into a ClusterState.

Targets: >= 25,000 pods/s and peak RSS <= 1 GiB for the listing process. The fake API runs in its
own process and the listing in a fresh one, so neither generation nor serving counts against the
client's time or memory. Where kubectl is on PATH, the same pods are listed with
`kubectl get pods -A -o json --chunk-size=500` and the ratio of our time to kubectl's is printed.

    python benchmarks/listing.py [--pods N] [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_PODS_PER_SECOND = 25_000
TARGET_RSS_BYTES = 1 << 30


def generate(path: Path, pods: int, nodes: int) -> int:
    from tests.support import k8s_objects as k

    def objects():  # type: ignore[no-untyped-def]
        for n in range(nodes):
            yield k.node(f"ip-10-{n // 250}-{n % 250}.ec2.internal", zone=f"us-east-1{'abc'[n % 3]}")
        apps = [f"app-{a}" for a in range(300)]
        for p in range(pods):
            app = apps[p % len(apps)]
            node = f"ip-10-{(p % nodes) // 250}-{(p % nodes) % 250}.ec2.internal"
            pending = p % 75 == 0
            yield k.realistic_pod(
                f"{app}-{p:06d}",
                f"ns-{p % 40}",
                node_name="" if pending else node,
                app=app,
                requests={"cpu": f"{100 + (p % 7) * 50}m", "memory": f"{128 + (p % 5) * 64}Mi"},
            )

    return k.write_jsonl(path, objects())


def measure(url: str) -> None:
    """Runs in a fresh process: list everything, print seconds, counts and peak RSS as JSON."""
    from reconciler.kube.live import LiveReader
    from tests.support.kube import make_api_client

    reader = LiveReader(make_api_client(url), page_size=500)
    started = time.perf_counter()
    state = reader.read(datetime.now(UTC))
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "pods": len(state.pods), "nodes": len(state.nodes), "rss": rss}))


def warm_up(url: str) -> float:
    """One raw listing first: a real API server answers lists from its warm watch cache, while the
    fake builds each page's bytes on first use; measuring that would time the fake, not us."""
    import urllib.parse
    import urllib.request

    started = time.perf_counter()
    token = ""
    while True:
        query = urllib.parse.urlencode({"limit": 500, **({"continue": token} if token else {})})
        with urllib.request.urlopen(f"{url}/api/v1/pods?{query}") as response:
            page = json.loads(response.read())
        token = page["metadata"].get("continue") or ""
        if not token:
            return time.perf_counter() - started


def kubectl_seconds(url: str, workdir: Path) -> float | None:
    if shutil.which("kubectl") is None:
        return None
    from tests.support.kube import write_kubeconfig

    kubeconfig = write_kubeconfig(workdir / "kubeconfig", url)
    started = time.perf_counter()
    subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "pods", "-A", "-o", "json", "--chunk-size=500"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--no-kubectl", action="store_true", help="skip the kubectl comparison (minutes)")
    parser.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return 0

    from reconciler.demo.kube_api import serve_in_subprocess

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        jsonl = workdir / "objects.jsonl"
        started = time.perf_counter()
        count = generate(jsonl, args.pods, args.nodes)
        size = jsonl.stat().st_size
        elapsed = time.perf_counter() - started
        print(f"generated {count} objects ({size / 2**20:.0f} MiB JSON) in {elapsed:.1f}s")
        with serve_in_subprocess(jsonl) as (url, _server):
            print(f"fake API warmed with one raw listing in {warm_up(url):.1f}s")
            result = subprocess.run(
                [sys.executable, __file__, "--measure", url], check=True, capture_output=True, text=True
            )
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            ours = figures["seconds"]
            theirs = None if args.no_kubectl else kubectl_seconds(url, workdir)
    rate = figures["pods"] / ours
    rss = figures["rss"]
    print(
        f"listing: {figures['pods']} pods + {figures['nodes']} nodes in {ours:.2f}s = {rate:,.0f} pods/s "
        f"(target >= {TARGET_PODS_PER_SECOND:,}); peak RSS {rss / 2**20:.0f} MiB (target <= 1024 MiB)"
    )
    if theirs is not None:
        command = "kubectl get pods -A -o json --chunk-size=500"
        print(f"{command}: {theirs:.2f}s; ours / kubectl = {ours / theirs:.2f}")
    ok = rate >= TARGET_PODS_PER_SECOND and rss <= TARGET_RSS_BYTES
    print("listing: " + ("met targets" if ok else "MISSED targets"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
