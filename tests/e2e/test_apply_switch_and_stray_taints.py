"""A second independent adversarial review, on the fixes of the first: each test asserts the promise
(those that broke it were fixed; issue 8's closing note)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.domain.model import OWN_DRAIN_TAINT
from tests.support.apply_steps import alice_clone, bot_commit, listing_b, ours, show
from tests.support.apply_world import (
    MAIN_PATH,
    TAGS,
    World,
    approved,
    manifest_on_main,
    pod,
    signed_commit,
)
from tests.support.git import BOB, git, needs_ssh_keygen

pytestmark = needs_ssh_keygen
NAMESPACE = ["kube-system"]


def taint(world: World, node: str, value: str = "0" * 40) -> None:
    found = world.kube.get_object("Node", None, node)
    assert found is not None
    found["spec"]["taints"] = [{"key": OWN_DRAIN_TAINT, "value": value, "effect": "NoSchedule"}]
    world.kube.put(found)


# ---------------------------------------------------------------- 5. the kill switch, per group


def test_group_switch_pulled_mid_run_stops_the_termination(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person runs `asg-reconciler suspend --node-group general` while apply is tainting node-b.
    Docs: the switch is read 'again before every change (each taint, eviction look and termination)'."""
    approved(world, capsys)

    def pull_switch(method: str, path: str, query: dict[str, str]) -> None:
        if method in ("PUT", "PATCH") and path == "/api/v1/nodes/node-b":
            cm = world.kube.get_object("ConfigMap", NAMESPACE[0], "asg-reconciler-control")
            if cm is None:
                world.kube.put(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "asg-reconciler-control", "namespace": NAMESPACE[0]},
                        "data": {
                            "suspend.general": "true",
                            "reason.general": "AZ outage",
                            "by.general": "ops",
                        },
                    }
                )
        return None

    world.kube.fault = pull_switch
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert world.kube.get_object("ConfigMap", NAMESPACE[0], "asg-reconciler-control") is not None
    assert world.b_id in world.in_service(), (
        "BROKE: terminated an instance of a group suspended mid-run\n" + show(result)
    )
    assert world.kube.get_object("Pod", "shop", "web-b") is not None, "BROKE: evicted in a suspended group"


def test_group_switch_on_at_start_touches_no_node_of_the_group(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """`suspend --node-group general`: 'a person stops every AWS and drain write of apply' for it.
    A stray taint (crashed run, approval since withdrawn) on a node of general: is it written?"""
    assert world.cli(capsys, "plan").code == 0
    taint(world, "node-b")
    assert world.cli(capsys, "suspend", "--node-group", "general", "--reason", "hands off").code == 0
    before = world.kube.get_object("Node", None, "node-b")
    result = world.cli(capsys, "apply")
    after = world.kube.get_object("Node", None, "node-b")
    assert before is not None and after is not None
    assert ours(world, "node-b"), (
        "BORDERLINE: a node of a suspended group was written (taint removed)\n" + show(result)
    )


# ---------------------------------------------------------------- 4. taint give-back


def test_stray_taint_on_an_instance_detached_from_its_asg_is_given_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crashed run left node-b tainted; then someone detached i-b from the ASG (the machine keeps
    running, the node keeps serving). It is not terminating or gone: the taint must come off."""
    assert world.cli(capsys, "plan").code == 0
    taint(world, "node-b")
    world.aws.autoscaling.detach_instances(
        InstanceIds=[world.b_id], AutoScalingGroupName="general", ShouldDecrementDesiredCapacity=True
    )
    state = world.aws.ec2.describe_instances(InstanceIds=[world.b_id])["Reservations"][0]["Instances"][0][
        "State"
    ]
    assert state["Name"] == "running"
    result = world.cli(capsys, "apply")
    assert not ours(world, "node-b"), "BROKE: stray taint kept on a running, detached node\n" + show(result)


def test_stray_taint_given_back_even_when_main_was_rewritten(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crashed run left node-b tainted (its approval since withdrawn); the bot force-pushes main.
    Every apply now refuses before anything: is the stray taint ever given back?"""
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0  # an applied commit: the last applied
    applied = git("rev-parse", "main", cwd=world.remote).strip()
    bot_commit(world, manifest_on_main(world).replace("desired: 2", "desired: 3"), "scale up")
    assert world.cli(capsys, "apply").code == 0
    taint(world, "node-b")  # a later run crashed mid-drain
    git("update-ref", "refs/heads/main", applied, cwd=world.remote)  # force-push back
    bot_commit(world, manifest_on_main(world).replace("desired: 2", "desired: 4"), "rewritten")
    first = world.cli(capsys, "apply")
    second = world.cli(capsys, "apply")
    assert first.code == 3 and second.code == 3
    assert not ours(world, "node-b"), "BROKE: stray taint kept forever while main is rewritten\n" + show(
        second
    )


def test_stray_taint_given_back_even_when_main_manifest_is_broken(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    taint(world, "node-b")
    bot_commit(world, manifest_on_main(world) + "\n  : broken: [\n", "break it")
    result = world.cli(capsys, "apply")
    assert result.code == 2
    assert not ours(world, "node-b"), "BROKE: a broken manifest keeps a stray taint forever\n" + show(result)


# ---------------------------------------------------------------- 1. tracing removals


def _two_groups(world: World) -> str:
    """The plan's manifest plus a second group `batch` (its own ASG), so deleting `general` keeps it valid."""
    world.aws.asg("batch", min_size=0, max_size=3, desired=0, tags=TAGS, launch_template="lt")
    world.aws.autoscaling.suspend_processes(AutoScalingGroupName="batch", ScalingProcesses=["AZRebalance"])
    text = manifest_on_main(world)
    return text.rstrip("\n") + "\n  batch:\n    desired: 0\n"


def test_laundering_through_a_group_deleted_then_restored(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """test_laundering_through_a_deleted_group held only because deleting the only group breaks the
    manifest. With a second group: bot lists b (B, unsigned), bot deletes group general (D), Alice
    restores it with a signed `git revert D` (R). R's own diff 'adds' b."""
    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    signed_commit(world, _two_groups(world), "add batch")  # a person adds a second group
    assert world.cli(capsys, "apply").code == 0
    with_b = manifest_on_main(world).replace(
        "removeInstances: []", f"removeInstances:\n      - {world.b_id}", 1
    )
    assert with_b != manifest_on_main(world)
    BOB.commit(world.remote, "main", {MAIN_PATH: with_b}, "drop b (unsigned)")
    refused = world.cli(capsys, "apply")
    assert refused.code == 3 and "not approved" in refused.out, show(refused)
    head, _, rest = with_b.partition("  general:\n")
    _, _, batch = rest.partition("  batch:\n")
    without = head + "  batch:\n" + batch
    bot_commit(world, without, "delete group general")
    world.cli(capsys, "apply")
    clone = alice_clone(world, "alice-revert-group")
    d = git("rev-parse", "HEAD", cwd=clone).strip()
    git("revert", "--no-edit", "-S", d, cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)
    result = world.cli(capsys, "apply")
    assert world.b_id in world.in_service(), (
        "BROKE: laundered through a deleted-then-restored group\n" + show(result)
    )


# ---------------------------------------------------------------- 6. valid-before at apply time


def test_an_expired_key_with_an_uppercase_window_option_backdating_is_refused(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenSSH matches allowed_signers options case-insensitively (opt_match/strncasecmp): an entry
    `VALID-BEFORE="..."` expires the key for ssh-keygen, but is it judged at apply time?"""
    import os
    from datetime import UTC, datetime, timedelta

    from tests.support.apply_world import keypair

    world.kube.put(pod("web-b2", "node-b", "100m"))
    assert world.cli(capsys, "plan").code == 0
    carol = keypair(world.tmp / "carol")
    expiry = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y%m%d%H%MZ")
    signers = world.tmp / "allowed_signers"
    signers.write_text(signers.read_text() + f'carol@example.com VALID-BEFORE="{expiry}" {carol}\n')
    clone = alice_clone(world, "carol-clone-upper")
    (clone / MAIN_PATH).write_text(listing_b(world))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {**os.environ, "GIT_COMMITTER_DATE": now, "GIT_AUTHOR_DATE": now}
    git(
        "-c", f"user.signingKey={world.tmp / 'carol.pub'}", "-c", "user.email=carol@example.com",
        "commit", "--quiet", "-a", "-S", "-m", "remove b (carol, now)", cwd=clone, env=env,
    )  # fmt: skip
    # ssh-keygen itself honours the uppercase option at the commit's date:
    check = subprocess_run(clone, signers)
    past = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {**os.environ, "GIT_COMMITTER_DATE": past, "GIT_AUTHOR_DATE": past}
    git("reset", "--quiet", "--hard", "HEAD~1", cwd=clone)
    (clone / MAIN_PATH).write_text(listing_b(world))
    git(
        "-c", f"user.signingKey={world.tmp / 'carol.pub'}", "-c", "user.email=carol@example.com",
        "commit", "--quiet", "-a", "-S", "-m", "remove b (carol, backdated)", cwd=clone, env=env,
    )  # fmt: skip
    git("push", "--quiet", "origin", "main", cwd=clone)
    result = world.cli(capsys, "apply")
    assert check != 0, "ssh-keygen ignores the uppercase option too (then this is no break)"
    assert world.b_id in world.in_service(), "BROKE: a key expired an hour ago approved a removal\n" + show(
        result
    )


def subprocess_run(clone: Any, signers: Any) -> int:
    import subprocess

    return subprocess.run(
        [
            "git",
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={signers}",
            "verify-commit",
            "HEAD",
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
    ).returncode


# ---------------------------------------------------------------- 4b. a dying node given back


def _aws_kills_b_on(world: World, method: str, suffix: str) -> None:
    def fault(m: str, path: str, query: dict[str, str]) -> None:
        if m == method and path.endswith(suffix):
            groups = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
            if any(
                i["InstanceId"] == world.b_id and i["LifecycleState"] == "InService"
                for i in groups["AutoScalingGroups"][0]["Instances"]
            ):  # a spot interruption, an operator's terminate, a failed health check
                world.aws.autoscaling.terminate_instance_in_auto_scaling_group(
                    InstanceId=world.b_id, ShouldDecrementDesiredCapacity=False
                )
        return None

    world.kube.fault = fault


@pytest.mark.parametrize("when", ["taint", "eviction"])
def test_a_node_whose_instance_dies_mid_run_is_not_given_back(
    world: World, capsys: pytest.CaptureFixture[str], when: str
) -> None:
    """'never a dying node's [taint given back]': AWS terminates i-b while apply taints / drains
    node-b. The node object lingers (the cloud controller has not deleted it yet)."""
    approved(world, capsys)
    if when == "taint":
        _aws_kills_b_on(world, "PATCH", "/api/v1/nodes/node-b")
    else:
        _aws_kills_b_on(world, "POST", "/eviction")
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    state = {
        i["InstanceId"]: i["LifecycleState"]
        for i in world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])[
            "AutoScalingGroups"
        ][0]["Instances"]
    }
    assert state.get(world.b_id, "gone") != "InService"
    assert world.kube.get_object("Node", None, "node-b") is not None
    assert ours(world, "node-b"), (
        f"BROKE: dying node-b given back (i-b {state.get(world.b_id, 'gone')})\n" + show(result)
    )
