"""What-if benchmark (issue 22): `what-if` of a 1,000-replica Deployment on the planner benchmark's
cluster (5,000 nodes in 200 ASGs, 150,000 running pods, 2,000 pending; benchmarks/_planner_world.py),
dumped as one kubectl JSON List, against moto holding the 200 ASGs and their 5,000 instances.

Target: the whole `what-if --snapshot FILE --output json` process <= 2 x the same cluster's
`plan --dry-run --snapshot FILE --output json` process (both fresh processes with a cold cache of
their own, AWS included; the better of --runs runs each, so a busy neighbour on the machine does not
decide it). What-if is plan --dry-run plus reading the manifest, building 1,000 pods through the
pod parser, a second inventory join and 1,000 more pods to place: it must not cost a second plan.

    python benchmarks/what_if.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner import MIB, create_asgs, moto_server, write_dump  # noqa: E402

TARGET_RATIO = 2.0
REPLICAS = 1000

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "checkout", "namespace": "shop"},
    "spec": {
        "replicas": REPLICAS,
        "selector": {"matchLabels": {"app": "checkout"}},
        "template": {
            "metadata": {"labels": {"app": "checkout"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example.com/checkout:1.0.0",
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                    }
                ]
            },
        },
    },
}


def entry() -> list[str]:
    script = Path(sys.executable).with_name("asg-reconciler")
    return [str(script)] if script.exists() else [sys.executable, "-m", "reconciler"]


def timed(command: list[str], env: dict[str, str], workdir: Path, name: str) -> tuple[float, int, Any]:
    """Seconds, peak RSS (bytes) and the JSON printed, of one fresh process with a cold cache."""
    cache = workdir / f"cache-{name}-{time.monotonic_ns()}"
    out, err = workdir / f"{name}.json", workdir / f"{name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=stdout, stderr=stderr, env={**env, "XDG_CACHE_HOME": str(cache)}
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{name} failed ({code}): {err.read_text().strip()}")
    return seconds, usage.ru_maxrss * 1024, json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2, help="runs of each command; the best counts")
    args = parser.parse_args()

    from _planner_world import CONFIG_YAML, build_world, dump_objects

    world = build_world()
    with tempfile.TemporaryDirectory() as tmp, moto_server() as (aws_env, _):
        workdir = Path(tmp)
        ids = create_asgs(world)
        snapshot, config, manifest = (
            workdir / "cluster.json",
            workdir / "asg-reconciler.yaml",
            workdir / "app.yaml",
        )
        config.write_text(CONFIG_YAML)
        objects = write_dump(snapshot, dump_objects(world, datetime.now(UTC).replace(microsecond=0), ids))
        manifest.write_text(json.dumps(DEPLOYMENT))
        print(
            f"dump: {objects:,} objects, {snapshot.stat().st_size / MIB:.0f} MiB; "
            f"what-if: {REPLICAS} replicas"
        )
        env = {**os.environ, **aws_env}
        common = ["--snapshot", str(snapshot), "--config", str(config), "--output", "json"]
        plan_runs, what_if_runs = [], []
        for _ in range(args.runs):
            plan_runs.append(timed([*entry(), "plan", "--dry-run", *common], env, workdir, "plan"))
            what_if_runs.append(timed([*entry(), "what-if", *common, str(manifest)], env, workdir, "what-if"))
    plan_seconds, plan_peak, _ = min(plan_runs, key=lambda r: r[0])
    what_if_seconds, what_if_peak, answer = min(what_if_runs, key=lambda r: r[0])
    ratio = what_if_seconds / plan_seconds
    groups = [g for g in answer["nodeGroups"] if g["add"]]
    placed = sum(1 for p in answer["pods"] if p["nodeGroup"])
    cost = (
        "cost unknown (a type without a price)"
        if answer["monthlyCost"] is None
        else f"${answer['monthlyCost']:,.2f}"
    )
    print(
        f"what-if: +{answer['add']} node(s) in {len(groups)} group(s), "
        f"{cost}; "
        f"{placed} of {len(answer['pods'])} pods placed"
    )
    print(
        f"what-if: {what_if_seconds:.1f}s (peak RSS {what_if_peak / MIB:.0f} MiB) vs plan --dry-run "
        f"{plan_seconds:.1f}s (peak RSS {plan_peak / MIB:.0f} MiB): ratio {ratio:.2f} "
        f"(target <= {TARGET_RATIO:g}); "
        f"runs: what-if {', '.join(f'{r[0]:.1f}s' for r in what_if_runs)}, "
        f"plan {', '.join(f'{r[0]:.1f}s' for r in plan_runs)}"
    )
    ok = ratio <= TARGET_RATIO and len(answer["pods"]) == REPLICAS
    print("what-if: " + ("met target" if ok else "MISSED target"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
