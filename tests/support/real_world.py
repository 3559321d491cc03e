"""The world a real-tier CLI story runs in: moto's Auto Scaling groups, the real control plane with
the node simulator as its kubelets, a local bare capacity repository, and the approver's and
apply's own keys (as tests/support/apply_world.py, with the real cluster in place of the fake)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support import k8s_objects as k
from tests.support.apply_world import keypair
from tests.support.aws import MotoAws
from tests.support.cli import Result, run
from tests.support.node_simulator import NodeSimulator
from tests.support.real_cluster import RealCluster, as_new

CLUSTER = "prod"
MAIN_PATH = f"capacity/{CLUSTER}.yaml"
PROPOSAL = f"asg-reconciler/{CLUSTER}/scale-down"

SHIPPED_CLUSTER = "prod-eks"  # the cluster examples/kubernetes/base/cluster.yaml names


class RealWorld:
    def __init__(
        self,
        aws: MotoAws,
        cluster: RealCluster,
        simulator: NodeSimulator,
        remote: Path,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        *,
        name: str = CLUSTER,
        extra: str = "",
    ) -> None:
        self.name = name
        self.tags = {
            "k8s.io/cluster-autoscaler/enabled": "true",
            f"k8s.io/cluster-autoscaler/{name}": "owned",
        }
        self.main_path, self.proposal = f"capacity/{name}.yaml", f"asg-reconciler/{name}/scale-down"
        self.aws, self.cluster, self.simulator, self.remote, self.tmp = aws, cluster, simulator, remote, tmp
        alice = keypair(tmp / "alice")
        self.signers = tmp / "allowed_signers"
        self.signers.write_text(f"alice@example.com {alice}\n")
        keypair(tmp / "record-key")
        gitconfig = tmp / "alice.gitconfig"
        gitconfig.write_text(
            "[user]\n\tname = Alice Admin\n\temail = alice@example.com\n"
            f"\tsigningKey = {tmp / 'alice.pub'}\n[gpg]\n\tformat = ssh\n"
        )
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        self.config = self.write_config(cluster.kubeconfig, extra=extra)

    def write_config(self, kubeconfig: Path, *, name: str = "asg-reconciler.yaml", extra: str = "") -> Path:
        path = self.tmp / name
        path.write_text(
            f"cluster: {self.name}\nregion: us-east-1\n"
            "nodeGroups:\n  autoDiscovery:\n"
            f"    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{self.name}\n"
            f"git: {{url: '{self.remote}', workDir: '{self.tmp / ('work-' + name)}'}}\n"
            f"kubernetes: {{kubeconfig: '{kubeconfig}'}}\n"
            "scaleDown: {unneededTime: 0s, delayAfterScaleUp: 0s}\n"
            f"approval: {{mode: signed, allowedSigners: '{self.signers}'}}\n"
            f"apply: {{drainTimeout: 120s, maxGracePeriod: 30s, signingKey: '{self.tmp / 'record-key'}'}}\n"
            + extra
        )
        return path

    def group(
        self,
        name: str,
        instance_type: str,
        *,
        desired: int,
        max_size: int = 10,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """An ASG of `instance_type` (AZRebalance suspended, as every group that scales down
        by name must be) whose instances the simulator registers as Nodes; waits for them."""
        self.aws.launch_template(f"{name}-lt", instance_type)
        self.aws.asg(
            name,
            min_size=0,
            max_size=max_size,
            desired=desired,
            tags={**self.tags, **(tags or {})},
            launch_template=f"{name}-lt",
        )
        self.aws.autoscaling.suspend_processes(AutoScalingGroupName=name, ScalingProcesses=["AZRebalance"])
        self.wait_nodes(name, desired)

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str, config: Path | None = None) -> Result:
        return run(capsys, *args, "--config", str(config or self.config))

    def plan_json(self, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
        result = self.cli(capsys, "plan", "--dry-run", "--output", "json")
        assert result.code == 0, result.err
        return json.loads(result.out)  # type: ignore[no-any-return]

    def describe(self, name: str) -> dict[str, Any]:
        groups = self.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        return groups["AutoScalingGroups"][0]  # type: ignore[no-any-return]

    def desired(self, name: str) -> int:
        return int(self.describe(name)["DesiredCapacity"])

    def in_service(self, name: str) -> set[str]:
        return {
            i["InstanceId"] for i in self.describe(name)["Instances"] if i["LifecycleState"] == "InService"
        }

    def nodes_of(self, name: str) -> list[Any]:
        ids = self.in_service(name)
        return [n for n in self.cluster.nodes() if n.spec.provider_id.rsplit("/", 1)[-1] in ids]

    def wait_nodes(self, name: str, count: int, timeout: float = 60) -> list[Any]:
        self.simulator.wait(
            lambda: len(self.nodes_of(name)) == count == len(self.in_service(name)),
            timeout,
            f"{count} Ready nodes of {name}",
        )
        return self.nodes_of(name)


def healthy(pods: list[Any], app: str) -> int:
    """Pods of `app` the disruption controller counts as healthy: Ready and not being deleted."""
    return sum(
        1
        for p in pods
        if (p.metadata.labels or {}).get("app") == app
        and p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
    )


def evictions(world: RealWorld, namespace: str, pods: set[str]) -> list[int]:
    """The API server's answers to evictions of these pods, in order, from its audit log."""
    return [
        int(e["responseStatus"]["code"])
        for e in world.cluster.plane.audit()
        if e.get("stage") == "ResponseComplete"
        and e["objectRef"].get("subresource") == "eviction"
        and e["objectRef"].get("namespace") == namespace
        and e["objectRef"].get("name") in pods
    ]


def under_used_node_under_a_pdb(world: RealWorld) -> tuple[str, str, str]:
    """Two m5.large nodes of `general`: web's three replicas (100m each, PDB maxUnavailable 1) all on
    one (the other cordoned meanwhile), and a 1200m pod pinned to the other: that one is 62% used and
    kept, the first at 16% is the one to remove. (busy node, idle node, idle node's instance id)."""
    cluster = world.cluster
    world.group("general", "m5.large", desired=2)
    nodes = world.nodes_of("general")
    busy, idle = sorted(n.metadata.name for n in nodes)
    idle_instance = next(n.spec.provider_id.rsplit("/", 1)[-1] for n in nodes if n.metadata.name == idle)
    cluster.kubectl("cordon", busy)
    cluster.apply(
        as_new(k.deployment("web", "shop", replicas=3, requests={"cpu": "100m", "memory": "128Mi"})),
        as_new(k.pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1)),
    )
    cluster.wait(lambda: healthy(cluster.pods("shop"), "web") == 3, 90, "web's 3 pods running")
    assert {p.spec.node_name for p in cluster.pods("shop")} == {idle}
    cluster.kubectl("uncordon", busy)
    big = as_new(k.deployment("big", "shop", replicas=1, requests={"cpu": "1200m"}))
    big["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": busy}
    cluster.apply(big)
    cluster.wait(lambda: healthy(cluster.pods("shop"), "big") == 1, 90, "big running on the busy node")
    cluster.wait(
        lambda: (
            cluster.kubectl("get", "pdb", "web", "-n", "shop", "-o", "jsonpath={.status.disruptionsAllowed}")
            == "1"
        ),
        60,
        "the disruption controller to allow one disruption of web",
    )
    return busy, idle, idle_instance
