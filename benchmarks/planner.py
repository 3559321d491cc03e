"""Planner benchmark (issue 3): 5,000 nodes in 200 ASGs, 150,000 running pods, 2,000 pending pods in
36 shapes, 10% of the nodes under the 0.5 utilisation threshold (benchmarks/_planner_world.py).

Targets:
- `make_plan` from an in-memory ClusterState: median <= 2 s over --runs runs (config defaults; the
  under-threshold nodes unneeded for 30 minutes, so scale-down proposes removals), peak RSS <= 1.5 GiB.
  Measured in a fresh process, so ru_maxrss is the planner's (plus the cluster it plans for).
- `asg-reconciler plan --dry-run --snapshot FILE --output json` on the same cluster dumped as one
  kubectl JSON List, against moto holding the 200 ASGs and their 5,000 instances: the whole CLI
  process, AWS included, <= 3 x the time `json.load` takes on that file (both in fresh processes,
  one run, so the machine's speed cancels out), and its requests per API (`awsCalls`).

Every instance has a node, so the plan asks AWS only for the groups (docs/aws-calls.md); the time
moto spends answering is measured inside its server and printed beside the ratio.

    python benchmarks/planner.py [--runs N] [--skip-cli] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import logging
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_SECONDS = 2.0
TARGET_RSS_BYTES = 3 << 29  # 1.5 GiB
TARGET_RATIO = 3.0
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MIB = 2**20
JSON_LOAD = "import json, sys, time; f = open(sys.argv[1]); t = time.perf_counter(); json.load(f); print(time.perf_counter() - t)"  # noqa: E501


# ---------------------------------------------------------------------------------- make_plan


def _rss_now() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_plan(runs: int, profile: bool) -> None:
    """Runs in a fresh process: build the cluster, plan it `runs` times, print the figures as JSON."""
    from _planner_world import CONFIG_DOCUMENT, build_world, cluster_state, node_groups, planner_memory

    from reconciler.config.settings import config_from_document
    from reconciler.domain.inventory import build_inventory
    from reconciler.planning.plan import make_plan
    from reconciler.planning.types import PlanInputs

    started = time.perf_counter()
    world = build_world()
    state = cluster_state(world, NOW)
    groups = node_groups(world, NOW)
    memory = planner_memory(world, NOW)
    stats = world.stats
    del world  # the planner gets the model only
    built = time.perf_counter() - started
    started = time.perf_counter()
    inventory = build_inventory(state, groups)
    inventory_seconds = time.perf_counter() - started
    inputs = PlanInputs(
        inventory=inventory,
        config=config_from_document(dict(CONFIG_DOCUMENT), "benchmark"),
        now=NOW,
        memory=memory,
    )
    gc.collect()
    rss_before = _rss_now()
    times = []
    first = None
    for _ in range(runs):
        started = time.perf_counter()
        plan = make_plan(inputs)
        times.append(time.perf_counter() - started)
        first = plan if first is None else first
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    hotspots: list[str] = []
    if profile or median(times) > TARGET_SECONDS:
        profiler = cProfile.Profile()
        profiler.runcall(make_plan, inputs)
        hotspots = top_functions(profiler, 12)
    print(
        json.dumps(
            {
                "times": times,
                "rss_before": rss_before,
                "peak": peak,
                "built": built,
                "inventory": inventory_seconds,
                "world": stats,
                "headline": headline(plan.to_dict()),
                "deterministic": plan == first,
                "hotspots": hotspots,
            }
        )
    )


def top_functions(profiler: cProfile.Profile, count: int) -> list[str]:
    """`own s  total s  calls  file:line(function)`, most own time first (cProfile's tottime)."""
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    entries = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    ranked = sorted(entries.items(), key=lambda item: -item[1][2])[:count]
    lines = []
    for (file, line, function), (_, calls, own, total, _) in ranked:
        where = f"{file.replace(str(ROOT) + '/', '')}:{line}({function})" if line else function
        lines.append(f"{own:8.2f}s {total:8.2f}s {calls:>9}  {where}")
    return lines


def headline(document: Mapping[str, Any]) -> str:
    """What the plan decided, in one line, from its public JSON (DESIGN §5.4)."""
    up = [g for g in document["nodeGroups"] if g["action"] == "scale-up"]
    added = sum(g["desired"] - g["current"] for g in up)
    removals = [r for g in document["nodeGroups"] for r in g["removals"]]
    pods = document["pendingPods"]
    by_scale_up = sum(1 for p in pods if p["nodeGroup"] and not p.get("reason"))
    fits = sum(1 for p in pods if p["nodeGroup"] and p.get("reason"))
    not_helped = sum(1 for p in pods if not p["nodeGroup"])
    return (
        f"{len(up)} groups scaled up by {added} nodes for {by_scale_up} pending pods; "
        f"{fits} pods fit existing or upcoming capacity; {not_helped} not helped (each with a reason); "
        f"{len(removals)} removals; {len(document['unremovableNodes'])} nodes kept with a reason"
    )


def run_plan_measurement(runs: int, profile: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--measure-plan", "--runs", str(runs)]
    if profile:
        command.append("--profile")
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


# ---------------------------------------------------------------------------------- the CLI


class TimedApp:
    """Wraps moto's WSGI app to add up the time it spends answering (requests arrive one at a time)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.seconds = 0.0
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        started = time.perf_counter()
        body = list(self.app(environ, start_response))
        with self._lock:
            self.seconds += time.perf_counter() - started
            self.requests += 1
        return body

    def reset(self) -> None:
        with self._lock:
            self.seconds, self.requests = 0.0, 0


@contextmanager
def moto_server() -> Iterator[tuple[dict[str, str], TimedApp]]:
    """moto in this process (as the demo runs it); yields the environment boto3 needs to reach it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").disabled = True
    saved = dict(os.environ)
    env = {
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        wsgi = server._server  # private, but the only way to time what moto itself spends
        assert wsgi is not None
        timed = TimedApp(wsgi.app)
        wsgi.app = timed
        host, port = server.get_host_and_port()
        env["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
        yield env, timed
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


def create_asgs(world: Any) -> dict[str, tuple[str, ...]]:
    """The world's 200 ASGs in moto, one zone each; returns each group's instance ids (its nodes'
    first, then the ones left unregistered)."""
    import boto3
    from _planner_world import POOL, asg_tags

    session = boto3.session.Session(region_name="us-east-1")
    autoscaling: Any = session.client("autoscaling")
    ec2: Any = session.client("ec2")
    templates: dict[str, str] = {}
    for g in world.groups:
        pool = POOL[g.pool]
        if pool.itype.name not in templates:
            created = ec2.create_launch_template(
                LaunchTemplateName=f"bench-{pool.itype.name}",
                LaunchTemplateData={"InstanceType": pool.itype.name, "ImageId": "ami-12345678"},
            )
            templates[pool.itype.name] = created["LaunchTemplate"]["LaunchTemplateId"]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=g.name,
            MinSize=g.min_size,
            MaxSize=g.max_size,
            DesiredCapacity=g.size + g.unregistered,
            AvailabilityZones=[g.zone],
            LaunchTemplate={"LaunchTemplateId": templates[pool.itype.name]},
            Tags=[
                {
                    "ResourceId": g.name,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": False,
                }
                for key, value in asg_tags(pool).items()
            ],
        )
    ids: dict[str, tuple[str, ...]] = {}
    for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate():
        for asg in page["AutoScalingGroups"]:
            ids[asg["AutoScalingGroupName"]] = tuple(i["InstanceId"] for i in asg.get("Instances", []))
    for g in world.groups:
        if len(ids.get(g.name, ())) != g.size + g.unregistered:
            raise RuntimeError(f"moto launched {len(ids.get(g.name, ()))} instances for {g.name}")
    return ids


def write_dump(path: Path, objects: Iterable[dict[str, Any]]) -> int:
    """One List, as `kubectl get nodes,daemonsets,pdb,pods -A -o json` prints it (without indentation)."""
    import orjson

    count = 0
    with open(path, "wb") as out:
        out.write(b'{"apiVersion":"v1","items":[')
        for obj in objects:
            if count:
                out.write(b",")
            out.write(orjson.dumps(obj))
            count += 1
        out.write(b'],"kind":"List","metadata":{"resourceVersion":""}}')
    return count


@dataclass
class CliFigures:
    create_seconds: float
    dump_seconds: float
    objects: int
    size: int
    json_seconds: float
    cli_seconds: float
    moto_seconds: float
    moto_requests: int
    headline: str
    aws_calls: Mapping[str, int]
    peak: int  # the CLI process's peak RSS, bytes

    @property
    def ratio(self) -> float:
        return (self.cli_seconds - self.moto_seconds) / self.json_seconds

    @property
    def ratio_with_moto(self) -> float:
        return self.cli_seconds / self.json_seconds


def cli_command(snapshot: Path, config: Path) -> list[str]:
    script = Path(sys.executable).with_name("asg-reconciler")
    entry = [str(script)] if script.exists() else [sys.executable, "-m", "reconciler"]
    return [
        *entry,
        "plan",
        "--dry-run",
        "--snapshot",
        str(snapshot),
        "--config",
        str(config),
        "--output",
        "json",
    ]


def run_cli_measurement(world: Any, workdir: Path) -> CliFigures:
    from _planner_world import CONFIG_YAML, dump_objects

    with moto_server() as (aws_env, timed):
        started = time.perf_counter()
        ids = create_asgs(world)
        create_seconds = time.perf_counter() - started
        print(f"moto: {len(ids)} ASGs with {sum(map(len, ids.values()))} instances in {create_seconds:.1f}s")

        snapshot, config = workdir / "cluster.json", workdir / "asg-reconciler.yaml"
        config.write_text(CONFIG_YAML)
        started = time.perf_counter()
        objects = write_dump(snapshot, dump_objects(world, datetime.now(UTC).replace(microsecond=0), ids))
        dump_seconds = time.perf_counter() - started
        size = snapshot.stat().st_size
        print(f"dump: {objects:,} objects, {size / MIB:.0f} MiB of JSON in {dump_seconds:.1f}s")

        loaded = subprocess.run(
            [sys.executable, "-c", JSON_LOAD, str(snapshot)], check=True, capture_output=True, text=True
        )
        json_seconds = float(loaded.stdout.strip())

        # a cold cache of our own (no disk-cached facts from earlier runs)
        env = {**os.environ, **aws_env, "XDG_CACHE_HOME": str(workdir / "cache")}
        timed.reset()
        out, err = workdir / "plan.json", workdir / "plan.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            started = time.perf_counter()
            process = subprocess.Popen(cli_command(snapshot, config), stdout=stdout, stderr=stderr, env=env)
            _, status, usage = os.wait4(process.pid, 0)  # this child's own peak RSS, not json.load's
            cli_seconds = time.perf_counter() - started
        peak = usage.ru_maxrss * 1024
        code = process.returncode = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise RuntimeError(f"plan --dry-run failed ({code}): {err.read_text().strip()}")
        document = json.loads(out.read_text())
        return CliFigures(
            create_seconds,
            dump_seconds,
            objects,
            size,
            json_seconds,
            cli_seconds,
            timed.seconds,
            timed.requests,
            headline(document),
            document.get("awsCalls", {}),
            peak,
        )


# ---------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="make_plan runs to take the median of")
    parser.add_argument("--skip-cli", action="store_true", help="only measure make_plan")
    parser.add_argument("--profile", action="store_true", help="print make_plan's hotspots even when fast")
    parser.add_argument("--measure-plan", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_plan:
        measure_plan(args.runs, args.profile)
        return 0

    from _planner_world import POOLS, build_world

    started = time.perf_counter()
    world = build_world()
    s = world.stats
    print(
        f"world: {len(world.nodes):,} nodes in {len(world.groups)} ASGs ({len(POOLS)} pools, "
        f"{len({p.itype.name for p in POOLS})} instance types), {s['running']:,} running pods "
        f"({s['controllers']} controllers, {len(world.daemonsets)} DaemonSets, {s['pdbs']} PDBs), "
        f"{s['pending']:,} pending pods in {s['shapes']} shapes, {s['under']} nodes "
        f"({s['under'] / len(world.nodes):.0%}) under the 0.5 threshold; laid out in "
        f"{time.perf_counter() - started:.1f}s"
    )

    figures = run_plan_measurement(args.runs, args.profile)
    times = figures["times"]
    plan_seconds, peak = median(times), figures["peak"]
    print(
        f"cluster built in {figures['built']:.1f}s, inventory in {figures['inventory']:.2f}s; "
        f"RSS before planning {figures['rss_before'] / MIB:.0f} MiB"
    )
    print(f"plan: {figures['headline']}")
    if not figures["deterministic"]:
        print("plan: runs gave DIFFERENT plans for the same input")
    if figures["hotspots"]:
        print("make_plan hotspots (one run under cProfile; own time, total time, calls):")
        print("\n".join(figures["hotspots"]))
    plan_ok = plan_seconds <= TARGET_SECONDS and peak <= TARGET_RSS_BYTES and figures["deterministic"]
    print(
        f"planner: make_plan median {plan_seconds:.2f}s over {len(times)} runs "
        f"(min {min(times):.2f}s, max {max(times):.2f}s; target <= {TARGET_SECONDS:g}s); "
        f"peak RSS {peak / MIB:.0f} MiB (target <= {TARGET_RSS_BYTES // MIB} MiB)"
    )

    cli_ok = True
    if not args.skip_cli:
        with tempfile.TemporaryDirectory() as tmp:
            cli = run_cli_measurement(world, Path(tmp))
        cli_ok = cli.ratio_with_moto <= TARGET_RATIO and cli.peak <= TARGET_RSS_BYTES
        print(f"plan --dry-run: {cli.headline}")
        calls = ", ".join(f"{op} {n}" for op, n in cli.aws_calls.items()) or "none"
        print(
            f"planner: plan --dry-run --snapshot {cli.cli_seconds:.1f}s, AWS included, json.load "
            f"{cli.json_seconds:.1f}s on the same {cli.size / MIB:.0f} MiB file: ratio "
            f"{cli.ratio_with_moto:.2f} (target <= {TARGET_RATIO:g}); moto spent {cli.moto_seconds:.1f}s "
            f"answering {cli.moto_requests} requests ({calls}); peak RSS {cli.peak / MIB:.0f} MiB "
            f"(target <= {TARGET_RSS_BYTES // MIB} MiB)"
        )
    missed = [name for name, ok in (("make_plan", plan_ok), ("plan --dry-run --snapshot", cli_ok)) if not ok]
    print("planner: " + ("met targets" if not missed else "MISSED targets: " + ", ".join(missed)))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
