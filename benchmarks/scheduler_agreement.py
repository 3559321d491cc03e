"""Plan accuracy against the real kube-scheduler (issue 30, item 4).

For each seeded random cluster — node groups of several instance types with labels, taints and two
zones; Deployments with node selectors, tolerations, zone spread, hostname anti-affinity and
pod-level resources — on the real control plane (tests/controlplane) with the node simulator playing
the kubelets of moto's instances:

1. the workloads are created and the real scheduler places what fits; the rest is Unschedulable;
2. `plan --dry-run --output json` (the CLI, live read) says how many nodes each group needs;
3. exactly that many are added (SetDesiredCapacity to the plan's `desired`), they register, and the
   real scheduler works until nothing changes;
4. the scenario agrees when every pod the plan placed in a group is scheduled and no new node is
   empty. Otherwise each disagreement's cause is printed: the pod and the scheduler's own message,
   or the empty node.

Prints the share of scenarios that agree (target: every one; a miss fails the benchmark) and the
causes. Needs the control plane built (`make control-plane`).

    python benchmarks/scheduler_agreement.py [--scenarios N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from tests.controlplane import binaries  # noqa: E402
from tests.controlplane.cluster import ControlPlane  # noqa: E402
from tests.support import k8s_objects as k  # noqa: E402
from tests.support.node_simulator import NodeSimulator  # noqa: E402
from tests.support.real_cluster import RealCluster, as_new, new_api_client  # noqa: E402

TARGET_SHARE = 1.0
CLUSTER = "bench"
TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{CLUSTER}": "owned"}
TYPES = ("m5.large", "m5.xlarge", "c5.large", "r5.large", "t3.large")
ZONES = ("us-east-1a", "us-east-1b")
LABEL = "k8s.io/cluster-autoscaler/node-template/label/"
TAINT = "k8s.io/cluster-autoscaler/node-template/taint/"


def balance_zones_as_aws_does() -> None:
    """moto launches all the instances of one scale-up into one zone picked at random; AWS balances a
    group across its zones, each new instance going to the zone with the fewest. The plan is judged
    against AWS, so the in-process moto launches one instance at a time into the least-used zone."""
    import moto.autoscaling.models as models

    original = models.FakeAutoScalingGroup.replace_autoscaling_group_instances

    def balanced(self: Any, count_needed: int, propagated_tags: dict[str, str]) -> None:
        for _ in range(count_needed):
            used = Counter(state.instance.placement.zone for state in self.instance_states)
            zone = min(self.availability_zones, key=lambda z: (used[z], z))
            chooser = models.random
            models.random = SimpleNamespace(choice=lambda zones, zone=zone: zone)  # type: ignore[assignment]
            try:
                original(self, 1, dict(propagated_tags))
            finally:
                models.random = chooser

    models.FakeAutoScalingGroup.replace_autoscaling_group_instances = balanced  # type: ignore[method-assign]


@contextmanager
def moto() -> Iterator[str]:
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
    balance_zones_as_aws_does()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=url,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    try:
        yield url
    finally:
        server.stop()


def scenario(rng: random.Random, index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(groups, workloads): each group a dict for the ASG; each workload a Deployment."""
    groups = []
    for g in range(rng.randint(1, 3)):
        tags = {f"{LABEL}pool": f"pool-{g}"}
        if g > 0 and rng.random() < 0.4:
            tags[f"{TAINT}dedicated"] = f"pool-{g}:NoSchedule"
        groups.append(
            {
                "name": f"s{index}-pool-{g}",
                "type": rng.choice(TYPES),
                "desired": rng.randint(0, 2),
                "tags": tags,
            }
        )
    workloads = []
    for w in range(rng.randint(2, 4)):
        group = rng.randrange(len(groups))
        tainted = f"{TAINT}dedicated" in groups[group]["tags"]
        cpu = rng.choice(["250m", "500m", "900m", "1500m"])
        memory = rng.choice(["256Mi", "1Gi", "2Gi", "3Gi"])
        pod_level = rng.random() < 0.25
        deployment = as_new(
            k.deployment(
                f"w{w}",
                "bench",
                replicas=rng.randint(1, 8),
                requests=None if pod_level else {"cpu": cpu, "memory": memory},
            )
        )
        spec = deployment["spec"]["template"]["spec"]
        if pod_level:  # pod-level resources (beta, on by default since 1.34)
            spec["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
        if tainted or rng.random() < 0.6:
            spec["nodeSelector"] = {"pool": f"pool-{group}"}
        if tainted:
            spec["tolerations"] = [
                {"key": "dedicated", "operator": "Equal", "value": f"pool-{group}", "effect": "NoSchedule"}
            ]
        labels = deployment["spec"]["selector"]["matchLabels"]
        choice = rng.random()
        if choice < 0.3:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": labels},
                }
            ]
        elif choice < 0.5:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}
                    ]
                }
            }
        workloads.append(deployment)
    return groups, workloads


def settle(cluster: RealCluster, quiet: float = 4.0, timeout: float = 120.0) -> None:
    """Until no pod changes binding or phase for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        now = sorted((p.metadata.name, p.spec.node_name or "", p.status.phase) for p in cluster.pods("bench"))
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.3)


def plan(config: Path) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "plan",
            "--dry-run",
            "--output",
            "json",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"plan failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def run_one(
    index: int, rng: random.Random, cluster: RealCluster, autoscaling: Any, ec2: Any, tmp: Path
) -> list[str]:
    """The causes of disagreement of one scenario (empty: it agrees)."""
    groups, workloads = scenario(rng, index)
    for group in groups:
        template = ec2.create_launch_template(
            LaunchTemplateName=f"{group['name']}-lt",
            LaunchTemplateData={"InstanceType": group["type"], "ImageId": "ami-12345678"},
        )["LaunchTemplate"]["LaunchTemplateId"]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=group["name"],
            MinSize=0,
            MaxSize=30,
            DesiredCapacity=group["desired"],
            AvailabilityZones=list(ZONES),
            LaunchTemplate={"LaunchTemplateId": template},
            Tags=[
                {
                    "ResourceId": group["name"],
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": True,
                }
                for key, value in {**TAGS, **group["tags"]}.items()
            ],
        )
    cluster.wait(lambda: len(cluster.nodes()) == sum(g["desired"] for g in groups), 60, "the groups' nodes")
    cluster.apply(*workloads)
    settle(cluster)
    before = {n.metadata.name for n in cluster.nodes()}
    config = tmp / "config.yaml"
    subprocess.run(["git", "init", "--quiet", "--bare", str(tmp / "capacity.git")], check=True)
    config.write_text(
        f"cluster: {CLUSTER}\nregion: us-east-1\nnodeGroups:\n  autoDiscovery:\n"
        f"    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{CLUSTER}\n"
        f"kubernetes: {{kubeconfig: '{cluster.kubeconfig}'}}\n"
        f"git: {{url: '{tmp / 'capacity.git'}', workDir: '{tmp / 'work'}'}}\n"
    )
    document = plan(config)
    placed = {p["pod"]: p["nodeGroup"] for p in document["pendingPods"] if p.get("nodeGroup")}
    for group in document["nodeGroups"]:
        if group["desired"] > group["current"]:
            autoscaling.set_desired_capacity(
                AutoScalingGroupName=group["name"], DesiredCapacity=group["desired"]
            )
    wanted = sum(max(g["desired"], g["current"]) for g in document["nodeGroups"])
    cluster.wait(lambda: len(cluster.nodes()) == wanted, 90, f"{wanted} nodes")
    settle(cluster)
    causes = []
    pods = cluster.pods("bench")
    for pod in pods:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if key in placed and not pod.spec.node_name:
            message = next(
                (c.message for c in (pod.status.conditions or []) if c.type == "PodScheduled"), "no condition"
            )
            causes.append(f"plan placed {key} in {placed[key]} but the scheduler did not: {message}")
    used = {p.spec.node_name for p in pods if p.spec.node_name}
    for node in cluster.nodes():
        if node.metadata.name not in before and node.metadata.name not in used:
            causes.append(f"new node {node.metadata.name} ({node.metadata.labels.get('pool')}) stayed empty")
    unplaced = len(document["pendingPods"]) - len(placed)
    reasons = sorted({str(p.get("reason")) for p in document["pendingPods"] if not p.get("nodeGroup")})
    added = wanted - len(before)
    summary = (
        f"{len(groups)} group(s), {len(pods)} pods, {len(document['pendingPods'])} pending: plan placed "
        f"{len(placed)} on {added} new node(s), left {unplaced} unplaced"
        + (f" ({'; '.join(reasons)})" if reasons else "")
    )
    return causes, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=10)
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args()
    reason = binaries.unavailable_reason()
    if reason is not None:
        print(f"scheduler_agreement: skipped: {reason}")
        return 0
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="scheduler-agreement-") as tmp, moto() as url:
        plane = ControlPlane(Path(tmp) / "cp", binaries.build()).start()
        api = new_api_client(plane.admin_kubeconfig)
        cluster = RealCluster(plane, api)
        session = boto3.session.Session(region_name="us-east-1")
        autoscaling, ec2 = session.client("autoscaling"), session.client("ec2")
        simulator = NodeSimulator(new_api_client(plane.admin_kubeconfig), autoscaling, ec2).start()
        agreed, report = 0, []
        started = time.monotonic()
        try:
            for index in range(args.scenarios):
                urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).close()
                cluster.reset()
                scratch = Path(tmp) / f"s{index}"
                scratch.mkdir()
                causes, summary = run_one(index, rng, cluster, autoscaling, ec2, scratch)
                agreed += not causes
                report.append((index, causes))
                print(f"scenario {index}: {'agrees' if not causes else 'DISAGREES'}: {summary}", flush=True)
                for cause in causes:
                    print(f"  - {cause}", flush=True)
        finally:
            simulator.stop()
            plane.stop()
    share = agreed / args.scenarios
    print(
        f"scheduler agreement: {agreed}/{args.scenarios} scenarios ({share:.0%}) in "
        f"{time.monotonic() - started:.0f}s (seed {args.seed}); target {TARGET_SHARE:.0%}"
    )
    return 0 if share >= TARGET_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
