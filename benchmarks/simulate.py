"""`simulate` benchmark (issue 13): one simulated day of a 200-node cluster at 30 s steps in <= 2 minutes.

The trace is written here with the generator's API (reconciler.simulation.generate): a `web` group
of m5.large (3 web pods of 500m / 1Gi fit one) whose diurnal Deployment swings between 120 and 600
replicas, so the group goes from about 45 nodes at night to about 200 at 13:00 and back; a base of
30 small pods; and a tainted `batch` group of m5.2xlarge that scales from zero for 60 one-CPU jobs at
02:00. Both policies scale up (morning, the nightly burst) and down (afternoon, after the jobs).

What is timed: the whole `asg-reconciler simulate --trace T --compare ca --duration 24h` command, both
policies (ours with reviewed scale-downs, and the cluster-autoscaler-like one), 2,881 plans each (one
at 0 and every 30 s through 24:00), in a fresh process started here: the interpreter, the imports,
reading the trace, both runs and the table. The child calls the console script's function
(`reconciler.cli:main`) with the config defaults (no config file, $ASG_RECONCILER_CONFIG unset) and
keeps the report `simulate_once` returns, for the node counts the table does not print. The planner's
and the engine's shares come from the engine's own clocks: "planner" is `make_plan`, "engine" the
rest of a step (the snapshot, `build_inventory`, events, the scheduler, the policy).

Target: the command's wall time <= 120 s. Also a miss: a run with no scale-up or no scale-down, or
not 2,881 plans.

    python benchmarks/simulate.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_SECONDS = 120.0
HOURS = 24
EXPECTED_PLANS = HOURS * 3600 // 30 + 1
MARKER = "BENCHMARK-FIGURES "
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
GROUPS: list[dict[str, Any]] = [
    {"name": "web", "instanceType": "m5.large", "minSize": 10, "maxSize": 250, "desired": 45, "zones": ZONES},
    {
        "name": "batch",
        "instanceType": "m5.2xlarge",
        "minSize": 0,
        "maxSize": 40,
        "desired": 0,
        "zones": ZONES,
        "labels": {"workload": "batch"},
        "taints": ["dedicated=batch:NoSchedule"],
    },
]


def write_benchmark_trace(path: Path) -> int:
    """The 200-node day, written and checked as `simulate trace generate` writes traces; its events."""
    from reconciler.simulation.generate import Batch, Diurnal, Steady, generate

    raw = generate(
        "mixed",
        HOURS,
        seed=1,
        groups=GROUPS,
        diurnal=Diurnal(min_replicas=120, max_replicas=600),
        batch=Batch(pods=60),
        steady=Steady(replicas=30),
    )
    raw.write(path)
    return len(raw.events)


def child(arguments: list[str]) -> int:
    """Run the CLI as `asg-reconciler` would, then print the figures the parent needs as one line."""
    import reconciler.runtime.simulate_stage as stage
    from reconciler.cli.commands import main

    reports: list[Any] = []
    original = stage.simulate_once

    def keep(request: Any) -> Any:
        report = original(request)
        reports.append(report)
        return report

    stage.simulate_once = keep
    try:
        main(arguments)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return int(exc.code) if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    figures = []
    for result in reports[0].results:
        series = result.timeline.nodes
        totals = [sum(counts) for counts in zip(*series.values(), strict=True)]
        figures.append(
            {
                "policy": result.policy,
                "plans": result.plans,
                "planSeconds": result.plan_seconds,
                "engineSeconds": result.engine_seconds,
                "nodesMin": min(totals),
                "nodesMax": max(totals),
                "groups": {name: [min(counts), max(counts)] for name, counts in series.items()},
                "scaleUps": [result.scale_ups, result.nodes_added],
                "scaleDowns": [result.scale_downs, result.nodes_removed],
                "nodeHours": result.node_hours,
                "pendingPodSeconds": result.pending_pod_seconds,
            }
        )
    print(MARKER + json.dumps(figures))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="write the trace into this directory and keep it")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        return child(options.child)

    with tempfile.TemporaryDirectory() as scratch:
        where = options.keep or Path(scratch)
        where.mkdir(parents=True, exist_ok=True)
        trace = where / "day-200-nodes.jsonl"
        started = time.perf_counter()
        events = write_benchmark_trace(trace)
        written = time.perf_counter() - started
        arguments = ["simulate", "--trace", str(trace), "--compare", "ca", "--duration", f"{HOURS}h"]
        environment = {k: v for k, v in os.environ.items() if k != "ASG_RECONCILER_CONFIG"}
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, __file__, "--child", *arguments],
            cwd=scratch,  # no ./asg-reconciler.yaml: the config defaults
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stdout + result.stderr)
        print(f"simulate: FAILED - the command exited {result.returncode}")
        return 1
    lines = result.stdout.splitlines()
    figures = json.loads(next(line for line in lines if line.startswith(MARKER))[len(MARKER) :])
    table = [line for line in lines if not line.startswith(MARKER)]

    print(
        f"trace: {events:,} events over {HOURS}h (web m5.large, batch m5.2xlarge), written in {written:.1f}s"
    )
    print(f"command: asg-reconciler {' '.join(arguments[:2])} day-200-nodes.jsonl {' '.join(arguments[3:])}")
    problems = []
    plans = 0
    for f in figures:
        plans += f["plans"]
        steps = f["plans"]
        planner, engine = 1000 * f["planSeconds"] / steps, 1000 * f["engineSeconds"] / steps
        groups = ", ".join(f"{name} {low}-{high}" for name, (low, high) in f["groups"].items())
        print(
            f"  {f['policy']:<5} {steps:,} plans in {f['planSeconds'] + f['engineSeconds']:.1f}s:"
            f" {planner + engine:.2f} ms per step (planner {planner:.2f} ms, engine {engine:.2f} ms);"
            f" nodes {f['nodesMin']}-{f['nodesMax']} ({groups});"
            f" scale-ups {f['scaleUps'][0]} steps / {f['scaleUps'][1]} nodes,"
            f" scale-downs {f['scaleDowns'][0]} / {f['scaleDowns'][1]}; {f['nodeHours']:,.1f} node-hours"
        )
        if steps != EXPECTED_PLANS:
            problems.append(f"{f['policy']}: {steps} plans, expected {EXPECTED_PLANS}")
        if f["scaleUps"][1] == 0 or f["scaleDowns"][1] == 0:
            problems.append(f"{f['policy']}: the day did not both scale up and scale down")
    ok = wall <= TARGET_SECONDS and not problems
    print(f"  the table's last line: {table[-1] if table else '(none)'}")
    print(
        f"simulate: {plans:,} plans (2 policies) in {wall:.1f}s wall for the whole CLI process"
        f" (target <= {TARGET_SECONDS:.0f}s): {'ok' if ok else 'MISSED'}"
    )
    for problem in problems:
        print(f"  MISSED: {problem}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
