"""Headroom end to end: reviewed in the manifest on main, planned by `plan` against moto's ASGs and a
kubectl dump, written back to a local bare repository; `validate` for the pull request that adds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.trailers import parse_message
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import BOB, git
from tests.support.plan_git_world import MAIN_PATH, PROPOSAL, Setup, node_c

# Two t3.small nodes (1930m each): node-a runs 1500m, node-b 100m. A headroom of two 1-CPU pods has
# room for one (on node-b): the plan adds one node for the other.
MANIFEST = """\
cluster: prod
nodeGroups:
  general:
    removeInstances: []
    hold: false
    desired: 2
    minSize: 1
    maxSize: 5
    headroom:               # room for a burst of two API pods
      replicas: 2
      requests: {cpu: "1", memory: 256Mi}
"""


def test_headroom_on_main_scales_up_and_keeps_the_nodes_it_needs(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    BOB.commit(bare_remote, "main", {MAIN_PATH: MANIFEST}, "keep room for a burst of two API pods")

    dry = setup.plan(capsys, setup.cluster(), "--dry-run", "--output", "json")
    assert dry.code == 0, dry.err
    (group,) = json.loads(dry.out)["nodeGroups"]
    assert (group["current"], group["desired"], group["action"]) == (2, 3, "scale-up")
    assert group["headroom"] == {
        "replicas": 2,
        "requests": {"cpu": "1", "memory": "256Mi"},
        "placed": 2,
        "nodes": 2,  # the node added, and node-b: a plan without headroom would remove it
        "added": 1,
        "kept": 1,
        "reason": "",
    }
    written = setup.plan(capsys, setup.cluster())
    assert written.code == 0, written.err
    assert "headroom 2 × (cpu 1, memory 256Mi)" in written.out and "2 nodes of desired 3" in written.out
    entry = parse_manifest(setup.show("main"), "main").group("general")
    assert entry is not None and entry.desired == 3
    assert entry.headroom is not None and entry.headroom.replicas == 2  # the bot kept it
    assert "    headroom:               # room for a burst of two API pods\n" in setup.show("main")
    message = parse_message(git("log", "-1", "--format=%B", "main", cwd=bare_remote))
    assert message is not None and [str(c) for c in message.changes] == ["general 2 -> 3"]
    assert message.reason_for("general") == (
        "headroom 2 × (cpu 1, memory 256Mi) needs 1 × t3.small; "
        "adds about $15.18 a month (1 x t3.small at $0.0208/h on-demand)"
    )

    # Apply raised the ASG and the node came up, idle: nothing is proposed, and nothing more added.
    objects = setup.cluster() + node_c(setup.add_instance())
    idle = setup.plan(capsys, objects, "--output", "json")
    assert idle.code == 0, idle.err
    (group,) = json.loads(idle.out)["nodeGroups"]
    assert (group["desired"], group["action"], group["removeInstances"]) == (3, "none", [])
    assert (group["headroom"]["placed"], group["headroom"]["kept"]) == (2, 2)
    assert setup.head(PROPOSAL) is None

    # A person lowers the headroom to nothing on main: the same idle nodes are proposed for removal.
    text = setup.show("main").replace("replicas: 2", "replicas: 0")
    BOB.commit(bare_remote, "main", {MAIN_PATH: text}, "no headroom after the launch")
    assert setup.plan(capsys, objects).code == 0
    assert setup.head(PROPOSAL) is not None
    assert setup.removal_ids(PROPOSAL)


def test_validate_rejects_a_bad_headroom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "prod.yaml"
    good.write_text(MANIFEST)
    assert run(capsys, "validate", str(good)).code == 0
    negative = tmp_path / "negative.yaml"
    negative.write_text(MANIFEST.replace("replicas: 2", "replicas: -2"))
    quantity = tmp_path / "quantity.yaml"
    quantity.write_text(MANIFEST.replace("memory: 256Mi", "memory: 256 MB"))
    result = run(capsys, "validate", str(good), str(negative), str(quantity))
    assert result.code == 2
    lines = [line for line in result.err.splitlines() if line.strip()]
    replicas = "nodeGroups.general.headroom.replicas"
    assert f"error: {negative}:10: {replicas}: -2 is out of range (use a value at least 0)" in lines
    assert any(
        line.startswith(
            f"error: {quantity}:11: nodeGroups.general.headroom.requests.memory: '256 MB' is not a Kubernetes"
        )
        for line in lines
    ), result.err
    assert "Traceback" not in result.err
