"""The manifest read model and its checks (schema with file:line, semantics, mirror warnings)."""

from __future__ import annotations

import pytest

from reconciler.domain.errors import UserError
from reconciler.gitops.manifest import (
    GroupEntry,
    Manifest,
    Removal,
    default_path,
    manifest_problems,
    mirror_edits,
    parse_manifest,
)

TEXT = """\
# hand-written
cluster: prod-eks
nodeGroups:
  asg-a:
    removeInstances:
      - i-0123456789abcdef0   # ip-10-0-1-2.ec2.internal
      - {id: i-0123456789abcdef1, node: ip-10-0-1-3}
    hold: false
    desired: 5
    minSize: 1
    maxSize: 10
  asg-b:
    desired: 0
    hold: true
    x-owner: team-data
"""


def test_parse_builds_the_read_model() -> None:
    manifest = parse_manifest(TEXT, "m.yaml")
    assert manifest == Manifest(
        cluster="prod-eks",
        groups=(
            GroupEntry(
                "asg-a",
                desired=5,
                remove_instances=(
                    Removal("i-0123456789abcdef0", "ip-10-0-1-2.ec2.internal"),
                    Removal("i-0123456789abcdef1", "ip-10-0-1-3"),
                ),
                min_size=1,
                max_size=10,
            ),
            GroupEntry("asg-b", desired=0, hold=True),
        ),
    )
    a = manifest.group("asg-a")
    assert a is not None and a.target == 3 and a.removal_ids == ("i-0123456789abcdef0", "i-0123456789abcdef1")
    assert manifest.group("nope") is None
    assert manifest.names == ("asg-a", "asg-b")
    assert default_path("prod-eks") == "capacity/prod-eks.yaml"


def test_the_example_manifest_is_valid() -> None:
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / "capacity" / "prod-eks.yaml"
    assert manifest_problems(path.read_text(), str(path)) == []


@pytest.mark.parametrize(
    ("replace", "by", "line", "path", "words"),
    [
        ("desired: 5", "desired: five", 9, "nodeGroups.asg-a.desired", "whole number"),
        ("desired: 5", "desried: 5", 9, "nodeGroups.asg-a", "did you mean desired?"),
        ("hold: false", "hold: yes", 8, "nodeGroups.asg-a.hold", "true or false"),
        ("i-0123456789abcdef0", "node-1", 6, "nodeGroups.asg-a.removeInstances.0", "instance id"),
        ("desired: 0", "desired: -1", 13, "nodeGroups.asg-b.desired", "at least 0"),
        ("cluster: prod-eks", "cluster: [x]", 2, "cluster", "cluster's name"),
    ],
)
def test_schema_errors_name_line_key_and_fix(replace: str, by: str, line: int, path: str, words: str) -> None:
    problems = manifest_problems(TEXT.replace(replace, by, 1), "m.yaml")
    assert problems, "expected a problem"
    first = problems[0]
    assert (first.file, first.line, first.path) == ("m.yaml", line, path)
    assert words in first.message
    with pytest.raises(UserError, match=rf"^m\.yaml:{line}: "):
        parse_manifest(TEXT.replace(replace, by, 1), "m.yaml")


def test_bad_yaml_is_one_problem_with_the_line() -> None:
    (problem,) = manifest_problems("cluster: x\nnodeGroups:\n  a: {desired: 1\n", "m.yaml")
    assert problem.file == "m.yaml" and problem.line is not None and "not valid YAML" in problem.message


def test_not_a_mapping() -> None:
    (problem,) = manifest_problems("- a\n", "m.yaml")
    assert "mapping" in problem.message


@pytest.mark.parametrize(
    ("replace", "by", "line", "words"),
    [
        ("desired: 5", "desired: 11", 9, "above maxSize 10"),
        ("minSize: 1", "minSize: 6", 9, "below minSize 6"),
        ("maxSize: 10", "maxSize: 0", 9, "above maxSize 0"),
        ("desired: 5", "desired: 2", 5, "below minSize 1"),
        ("i-0123456789abcdef1, node", "i-0123456789abcdef0, node", 5, None),
    ],
)
def test_semantic_errors(replace: str, by: str, line: int, words: str | None) -> None:
    problems = manifest_problems(TEXT.replace(replace, by, 1), "m.yaml")
    assert problems
    assert problems[0].line == line
    if words:
        assert words in problems[0].message


def test_an_instance_in_two_groups() -> None:
    text = TEXT.replace("    desired: 0\n", "    desired: 1\n    removeInstances: [i-0123456789abcdef0]\n")
    (problem,) = manifest_problems(text, "m.yaml")
    assert problem.path == "nodeGroups.asg-b.removeInstances" and "also listed under asg-a" in problem.message


def test_mirror_edits_warn_with_the_line() -> None:
    before = parse_manifest(TEXT, "m.yaml")
    after = parse_manifest(TEXT.replace("minSize: 1", "minSize: 2"), "m.yaml")
    (warning,) = mirror_edits(before, after, "m.yaml")
    assert warning.line == 10 and warning.path == "nodeGroups.asg-a.minSize"
    assert "editing minSize changes nothing; change the ASG" in warning.message
    assert mirror_edits(before, before, "m.yaml") == []
    # a new group's mirror is not an edit
    assert mirror_edits(Manifest("prod-eks"), after, "m.yaml") == []
