"""`headroom` in the manifest: read, checked (file:line, field and fix), carried to the planner, and
left byte-for-byte alone by every edit the bot makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.model import Resources
from reconciler.gitops.manifest import Removal, manifest_problems, parse_manifest
from reconciler.gitops.manifest_edit import SetDesired, SetMirror, SetRemovals, SettleRemovals, apply_edits
from reconciler.gitops.plan_edits import committed_groups
from reconciler.gitops.validate import validate_files
from reconciler.planning.types import Headroom

GI = 2**30

TEXT = """\
cluster: prod
nodeGroups:
  general:
    removeInstances: []
    hold: false
    desired: 3
    minSize: 1
    maxSize: 10
    headroom:                 # room for a burst, reviewed like any capacity
      replicas: 2
      requests: {cpu: "1", memory: 2Gi}
  gpu:
    removeInstances: [i-0123456789abcdef0]
    hold: false
    desired: 2
    headroom:
      replicas: 1
      requests:
        cpu: 500m
        memory: 1.5Gi
        nvidia.com/gpu: 1
"""


def test_headroom_is_read_into_the_model_and_handed_to_the_planner() -> None:
    manifest = parse_manifest(TEXT, "m.yaml")
    general, gpu = manifest.groups
    assert general.headroom == Headroom(2, Resources({"cpu": 1000, "memory": 2 * GI}))
    assert gpu.headroom == Headroom(1, Resources({"cpu": 500, "memory": 3 * GI // 2, "nvidia.com/gpu": 1}))
    assert general.headroom is not None and general.headroom.describe() == "2 × (cpu 1, memory 2Gi)"
    assert gpu.headroom is not None
    assert gpu.headroom.describe() == "1 × (cpu 500m, memory 1.5Gi, nvidia.com/gpu 1)"
    committed = committed_groups(manifest)
    assert committed["general"].headroom == general.headroom
    assert committed["gpu"].headroom == gpu.headroom and committed["gpu"].desired == 1
    plain = parse_manifest("cluster: prod\nnodeGroups:\n  general: {desired: 1}\n", "m.yaml")
    assert plain.groups[0].headroom is None and committed_groups(plain)["general"].headroom is None


@pytest.mark.parametrize(
    ("replace", "by", "line", "path", "words"),
    [
        ("replicas: 2", "replicas: -1", 10, "nodeGroups.general.headroom.replicas", "at least 0"),
        ("replicas: 2", "replicas: two", 10, "nodeGroups.general.headroom.replicas", "whole number"),
        ('cpu: "1"', 'cpu: "1 core"', 11, "nodeGroups.general.headroom.requests.cpu", "quantity"),
        ("memory: 1.5Gi", "memory: -1Gi", 20, "nodeGroups.gpu.headroom.requests.memory", "0 or more"),
        (
            "nvidia.com/gpu: 1",
            "nvidia.com/gpu: 0.5",
            21,
            "nodeGroups.gpu.headroom.requests.nvidia.com/gpu",
            "whole number",
        ),
        ("nvidia.com/gpu: 1", "gpu: 1", 21, "nodeGroups.gpu.headroom.requests.gpu", "nvidia.com/gpu"),
        ("      replicas: 1\n", "", 16, "nodeGroups.gpu.headroom", "replicas"),
        ('{cpu: "1", memory: 2Gi}', "{}", 11, "nodeGroups.general.headroom.requests", "cpu"),
        ('{cpu: "1", memory: 2Gi}', "{cpu: 0}", 11, "nodeGroups.general.headroom.requests", "above 0"),
        (
            "      replicas: 2\n",
            "      replicas: 2\n      size: 3\n",
            11,
            "nodeGroups.general.headroom",
            "unknown key 'size'",
        ),
    ],
)
def test_a_bad_headroom_is_one_line_naming_file_line_field_and_fix(
    replace: str, by: str, line: int, path: str, words: str
) -> None:
    text = TEXT.replace(replace, by, 1)
    assert text != TEXT
    problems = manifest_problems(text, "m.yaml")
    assert problems, "expected a problem"
    first = problems[0]
    assert (first.file, first.line, first.path) == ("m.yaml", line, path), str(first)
    assert words in first.message, str(first)
    assert "\n" not in str(first)
    with pytest.raises(UserError, match=rf"^m\.yaml:{line}: "):
        parse_manifest(text, "m.yaml")


def test_validate_rejects_a_bad_headroom_with_exit_2(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(TEXT)
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEXT.replace("memory: 2Gi", "memory: 2GB"))
    assert validate_files([good], previous=lambda p: None).exit_code == 0
    report = validate_files([good, bad], previous=lambda p: None)
    assert report.exit_code == 2
    (problem,) = report.errors
    assert str(problem).startswith(f"{bad}:11: nodeGroups.general.headroom.requests.memory: '2GB' is not a")


def test_the_bots_edits_leave_headroom_byte_for_byte() -> None:
    """The planner writes desired, the mirror and removals; a person's headroom (comments, flow and
    block style, quoting) survives every one of them."""
    edited = apply_edits(
        TEXT,
        "m.yaml",
        [
            SetDesired("general", 5),
            SetMirror("general", 2, 12),
            SetRemovals("general", (Removal("i-0123456789abcdef1", "ip-10-0-1-9"),)),
            SettleRemovals("gpu", frozenset({"i-0123456789abcdef0"})),
        ],
    )
    for block in (
        "    headroom:                 # room for a burst, reviewed like any capacity\n"
        "      replicas: 2\n"
        '      requests: {cpu: "1", memory: 2Gi}\n',
        "    headroom:\n      replicas: 1\n      requests:\n        cpu: 500m\n        memory: 1.5Gi\n"
        "        nvidia.com/gpu: 1\n",
    ):
        assert block in edited
    manifest = parse_manifest(edited, "m.yaml")
    assert manifest.groups[0].desired == 5 and manifest.groups[1].desired == 1
    assert manifest.groups[0].headroom == parse_manifest(TEXT, "m.yaml").groups[0].headroom


def test_the_example_manifest_shows_headroom() -> None:
    path = Path(__file__).parents[2] / "examples" / "capacity" / "prod-eks.yaml"
    manifest = parse_manifest(path.read_text(), str(path))
    assert any(g.headroom is not None and g.headroom.replicas > 0 for g in manifest.groups)
