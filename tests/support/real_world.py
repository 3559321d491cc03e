"""The world a real-tier CLI story runs in: moto's Auto Scaling groups, the real control plane with
the node simulator as its kubelets, a local bare capacity repository, and the approver's and
apply's own keys (as tests/support/apply_world.py, with the real cluster in place of the fake)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.apply_world import keypair
from tests.support.aws import MotoAws
from tests.support.cli import Result, run
from tests.support.node_simulator import NodeSimulator
from tests.support.real_cluster import RealCluster

CLUSTER = "prod"
TAGS = {"k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{CLUSTER}": "owned"}
MAIN_PATH = f"capacity/{CLUSTER}.yaml"
PROPOSAL = f"asg-reconciler/{CLUSTER}/scale-down"


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
        extra: str = "",
    ) -> None:
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
            f"cluster: {CLUSTER}\nregion: us-east-1\n"
            "nodeGroups:\n  autoDiscovery:\n"
            f"    - asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{CLUSTER}\n"
            f"git: {{url: '{self.remote}', workDir: '{self.tmp / ('work-' + name)}'}}\n"
            f"kubernetes: {{kubeconfig: '{kubeconfig}'}}\n"
            "scaleDown: {unneededTime: 0s, delayAfterScaleUp: 0s}\n"
            f"approval: {{mode: signed, allowedSigners: '{self.signers}'}}\n"
            f"apply: {{drainTimeout: 120s, signingKey: '{self.tmp / 'record-key'}'}}\n" + extra
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
            tags={**TAGS, **(tags or {})},
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
