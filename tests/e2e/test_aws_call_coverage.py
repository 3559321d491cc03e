"""The IAM policies in examples/iam/ against the AWS calls each stage really makes, measured.

Every AWS API call goes through a botocore session made by `reconciler.aws.clients.core_session`;
here each new session gets a `before-call` handler that records the call (service and operation)
under the stage that is running. `before-call` fires once per API call, before signing and before
any retry, so a call counts even when the endpoint fails it (moto answers DescribeInstanceRefreshes
with an HTML 500 that the code tolerates). The commands run in-process, end to end, against moto,
the fake Kubernetes API and a bare repository (the `world` of test_cli_apply.py):

  plan stage:  `plan` (writes main and a scale-down proposal), `plan --dry-run`, and a `plan` that
               commits a scale-up: what the plan Deployment (and `run` with `stages: [plan]`) does.
  apply stage: `apply` with nothing approved, `apply --dry-run`, the `apply` that drains and
               terminates, the `apply` after it (the terminated node still carries the drain taint:
               apply asks AWS whether its instance is going away), and the `apply` of a scale-up.
  people:      `approve scale-down` (no AWS call at all) and `status` (the plan stage's reads at
               most), run with a person's credentials, not a role's.

The test fails when a stage calls an action its policy does not grant (AccessDenied in production)
and when a policy grants an action no stage was seen to call (privilege nobody needs).
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.aws import instance_types
from reconciler.aws.cache import cache_root
from reconciler.aws.clients import new_session
from tests.support import k8s_objects as k
from tests.support.apply_world import TAGS, World, pod
from tests.support.aws import REGION, on_every_session
from tests.support.failing_launches import FailingLaunches
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen

IAM = Path(__file__).resolve().parents[2] / "examples" / "iam"
POLICIES = {"plan": IAM / "plan-policy.json", "apply": IAM / "apply-policy.json"}

# Actions a policy may grant although no end-to-end run here calls them, each with why. moto fails
# DescribeInstanceRefreshes with an HTML 500, but the call is still made (and recorded) first.
_KUBECONFIG = "the CI workflows' `aws eks update-kubeconfig` (the AWS CLI, not asg-reconciler)"
UNREACHED: dict[str, dict[str, str]] = {
    "plan": {"eks:DescribeCluster": _KUBECONFIG},
    "apply": {"eks:DescribeCluster": _KUBECONFIG},
}
WRITES = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def iam_action(model: Any) -> str:
    """`autoscaling:DescribeAutoScalingGroups` for botocore's operation model: the IAM prefix is the
    service's signing name (autoscaling, ec2, sts), the action its operation name."""
    return f"{model.service_model.signing_name}:{model.name}"


def granted_actions(path: Path) -> set[str]:
    document = json.loads(path.read_text())
    actions: set[str] = set()
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow", f"{path.name}: only Allow statements are expected"
        listed = statement["Action"]
        for action in [listed] if isinstance(listed, str) else listed:
            assert "*" not in action, f"{path.name}: {action}: no wildcards in a least-privilege policy"
            actions.add(action)
    return actions


class Recorder:
    """AWS calls seen, per stage; `stage` says whose calls are being made now."""

    def __init__(self) -> None:
        self.stage = "setup"
        self.calls: dict[str, set[str]] = defaultdict(set)
        self.writes: list[tuple[str, dict[str, Any]]] = []  # (action, its parameters)

    def before_call(self, model: Any, params: Any = None, **_: Any) -> None:
        action = iam_action(model)
        self.calls[self.stage].add(action)
        if action in WRITES:
            self.writes.append((action, dict((params or {}).get("body") or {})))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recording = Recorder()
    on_every_session(monkeypatch, "before-call", recording.before_call)
    yield recording


def as_stage(
    world: World, recorder: Recorder, capsys: pytest.CaptureFixture[str], stage: str, *args: str
) -> Any:
    """One command as a fresh process of `stage` would run it, on a machine that never ran it:
    DescribeInstanceTypes answers are cached per process, and instance types and launch template
    versions on disk, so both are cleared or the second stage would never be seen asking."""
    instance_types.clear_cache()
    shutil.rmtree(cache_root(), ignore_errors=True)
    recorder.stage = stage
    try:
        result = world.cli(capsys, *args)
    finally:
        recorder.stage = "setup"
    assert result.code == 0, f"{stage}: {' '.join(args)}\n{result.out}\n{result.err}"
    return result


def test_each_stage_calls_exactly_what_its_policy_grants(
    world: World, recorder: Recorder, capsys: pytest.CaptureFixture[str], failing_launches: FailingLaunches
) -> None:
    # A second discovered group launching from a launch configuration (min = max = 0, so the
    # planner never picks it): discovery then reads DescribeLaunchConfigurations too.
    world.aws.launch_configuration("legacy-lc", "t3.small")
    world.aws.asg("legacy", min_size=0, max_size=0, desired=0, tags=TAGS, launch_configuration="legacy-lc")
    # And one at zero launching from a template: no node to copy, so its template version and
    # instance type are read (a group with a Ready node takes its template from the node).
    world.aws.asg("empty", min_size=0, max_size=0, desired=0, tags=TAGS, launch_template="lt-empty")
    # And an EKS managed node group at zero: its labels and taints are the node group's (DescribeNodegroup).
    eks = new_session(REGION).client("eks")
    eks.create_cluster(name="prod", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
    eks.create_nodegroup(
        clusterName="prod", nodegroupName="mng", nodeRole="arn:aws:iam::123456789012:role/n", subnets=["s"]
    )
    mng_tags = {**TAGS, "eks:cluster-name": "prod", "eks:nodegroup-name": "mng"}
    world.aws.asg("eks-mng", min_size=0, max_size=0, desired=0, tags=mng_tags, launch_template="lt-mng")

    as_stage(world, recorder, capsys, "plan", "plan")  # node-b is idle: a scale-down proposal
    as_stage(world, recorder, capsys, "apply", "apply")  # nothing approved yet on main
    as_stage(world, recorder, capsys, "approve", "approve", "scale-down")
    as_stage(world, recorder, capsys, "apply", "apply", "--dry-run")
    applied = as_stage(world, recorder, capsys, "apply", "apply")
    assert world.b_id not in world.in_service() and world.desired() == 1, applied.out
    as_stage(world, recorder, capsys, "apply", "apply")  # node-b keeps its taint: going away?

    world.kube.put(pod("web-a2", "node-a", "800m"))  # node-a is full: the jobs need new nodes
    for i in range(2):
        world.kube.put(
            k.pod(f"job-{i}", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j")
        )
    as_stage(world, recorder, capsys, "plan", "plan", "--dry-run")
    as_stage(world, recorder, capsys, "plan", "plan")  # commits the scale-up to main
    raised = as_stage(world, recorder, capsys, "apply", "apply")
    assert world.desired() > 1 and "raised desired" in raised.out, raised.out
    # The new instances have no node yet: their launch times are read (maxNodeProvisionTime).
    as_stage(world, recorder, capsys, "plan", "plan", "--dry-run")
    as_stage(world, recorder, capsys, "apply", "apply")
    # AWS cannot launch the next raise: desired stays above the instances, so every stage reads the
    # group's scaling activities (DescribeScalingActivities) to tell a failed launch from a slow one.
    failing_launches.fail("general")
    for i in range(2, 4):
        world.kube.put(
            k.pod(f"job-{i}", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j")
        )
    as_stage(world, recorder, capsys, "plan", "plan")
    unfilled = world.desired()
    as_stage(world, recorder, capsys, "apply", "apply")
    assert world.desired() > unfilled and failing_launches.activities["general"], "the raise did not fail"
    as_stage(world, recorder, capsys, "plan", "plan", "--dry-run")
    as_stage(world, recorder, capsys, "apply", "apply")
    as_stage(world, recorder, capsys, "status", "status")

    problems = []
    for stage, path in POLICIES.items():
        granted = granted_actions(path)
        seen = recorder.calls[stage]
        problems += [f"{stage}: calls {a}, which {path.name} does not grant" for a in sorted(seen - granted)]
        unused = granted - seen - set(UNREACHED[stage])
        problems += [
            f"{stage}: {path.name} grants {a}, which no test saw the stage call" for a in sorted(unused)
        ]
        problems += [
            f"{stage}: UNREACHED lists {a}, which the stage was seen calling"
            for a in sorted(set(UNREACHED[stage]) & seen)
        ]
    # `status` is a person's tool, but it reads only what the plan stage reads: the plan policy
    # (or any read-only role with these actions) is enough to run it.
    problems += [
        f"status calls {a}, outside {POLICIES['plan'].name}"
        for a in sorted(recorder.calls["status"] - granted_actions(POLICIES["plan"]))
    ]
    problems += [f"approve calls {a}: it needs no AWS credentials" for a in sorted(recorder.calls["approve"])]
    assert not problems, "\n".join(problems)


def test_apply_writes_only_to_groups_its_tag_condition_admits(
    world: World, recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    """moto does not evaluate IAM: check the condition by hand on every group apply wrote to."""
    statement = next(s for s in json.loads(POLICIES["apply"].read_text())["Statement"] if "Condition" in s)
    assert sorted(statement["Action"]) == sorted(WRITES)
    (tag_key,) = (key.removeprefix("aws:ResourceTag/") for key in statement["Condition"]["Null"])
    tag_key = tag_key.replace("CLUSTER_NAME", "prod")  # the world's `cluster:`
    instances = {i: "general" for i, _ in world.instances}

    as_stage(world, recorder, capsys, "plan", "plan")
    as_stage(world, recorder, capsys, "approve", "approve", "scale-down")
    as_stage(world, recorder, capsys, "apply", "apply")
    world.kube.put(pod("web-a2", "node-a", "800m"))
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    as_stage(world, recorder, capsys, "plan", "plan")
    as_stage(world, recorder, capsys, "apply", "apply")

    assert {action for action, _ in recorder.writes} == set(WRITES)
    for action, params in recorder.writes:
        group = params.get("AutoScalingGroupName") or instances[params["InstanceId"]]
        described = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        tags = {t["Key"] for t in described["AutoScalingGroups"][0]["Tags"]}
        assert tag_key in tags, f"{action} on {group}, which lacks {tag_key}: AccessDenied in AWS"
