"""`plan` writing to Git end to end: a local bare repo, moto for the ASGs, a kubectl dump for the
cluster, and the fake GitHub for pull requests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.trailers import parse_message
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import BOB, git
from tests.support.github_api import FakeGitHub
from tests.support.plan_git_world import MAIN_PATH, PROPOSAL, REPO, REVIEW, STATE, TOKEN, Setup, node_c


@pytest.fixture(scope="module")
def github_server() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo=REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture
def github(github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    github_server.reset()
    github_server.grant("carol", "write")  # the person who approves proposals in these tests
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return github_server


class Clock:
    """What `reconciler.cli.commands._now` returns: a test moves it by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("reconciler.cli.commands._now", clock)
    return clock


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_scale_up_lands_on_main_with_trailers_and_nothing_twice(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    objects = setup.cluster(busy_b=1500, pending=2)
    result = setup.plan(capsys, objects)
    assert result.code == 0, result.err
    manifest = parse_manifest(setup.show("main"), "main")
    assert manifest.group("general") is not None
    assert manifest.group("general").desired == 4  # type: ignore[union-attr]
    message = parse_message(git("log", "-1", "--format=%B", "main", cwd=bare_remote))
    assert message is not None and message.cluster == "prod"
    assert [str(c) for c in message.changes] == ["general 2 -> 4"]
    assert "2 pending pod(s) need 2 × t3.small" in message.reason_for("general")
    state_head = setup.head("asg-reconciler/prod/state")
    main_head = setup.head("main")

    again = setup.plan(capsys, objects)  # same world, and main already says so
    assert again.code == 0, again.err
    assert setup.head("main") == main_head
    assert setup.head("asg-reconciler/prod/state") == state_head
    assert "nothing to write" in again.out


def test_scale_down_proposal_lifecycle(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, github)
    (b_id, _) = setup.instances[1]

    opened = setup.plan(capsys, setup.cluster())
    assert opened.code == 0, opened.err
    proposal = parse_manifest(setup.show(PROPOSAL), PROPOSAL).group("general")
    assert proposal is not None
    assert proposal.removal_ids == (b_id,) and proposal.desired == 2 and proposal.target == 1
    assert parse_manifest(setup.show("main"), "main").group("general").removal_ids == ()  # type: ignore[union-attr]
    pull = github.pull(1)
    assert pull.state == "open" and pull.head == PROPOSAL
    assert b_id in pull.body and "node-b" in pull.body
    message = parse_message(git("log", "-1", "--format=%B", PROPOSAL, cwd=bare_remote))
    assert message is not None and message.removals_for("general") == (b_id,)

    writes, head = len(github.writes()), setup.head(PROPOSAL)
    unchanged = setup.plan(capsys, setup.cluster())
    assert unchanged.code == 0, unchanged.err
    assert setup.head(PROPOSAL) == head
    assert len(github.writes()) == writes, "an unchanged proposal must not touch the pull request"

    busy = setup.plan(capsys, setup.cluster(busy_b=1000))  # node b is needed again
    assert busy.code == 0, busy.err
    assert setup.head(PROPOSAL) is None
    assert github.pull(1).state == "closed"
    assert "no longer valid" in github.comments(1)[-1]


def test_a_missing_forge_token_pushes_no_proposal_branch(
    aws: MotoAws,
    bare_remote: Path,
    tmp_path: Path,
    github: FakeGitHub,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The token is looked at before the branch is pushed: a missing one is exit 2 with the fix and
    no branch, so the next plan (token set) opens branch and pull request together."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    monkeypatch.delenv("GITHUB_TOKEN")
    refused = setup.plan(capsys, setup.cluster())
    assert refused.code == 2, refused.err
    assert "forge.tokenEnv" in refused.err and "GITHUB_TOKEN" in refused.err
    assert "Traceback" not in refused.err
    assert setup.head(PROPOSAL) is None
    assert github.writes() == []

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    opened = setup.plan(capsys, setup.cluster())
    assert opened.code == 0, opened.err
    assert setup.head(PROPOSAL) is not None
    assert github.pull(1).state == "open" and github.pull(1).head == PROPOSAL


def test_a_persons_commit_on_the_proposal_is_never_overwritten(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, github)
    assert setup.plan(capsys, setup.cluster()).code == 0
    text = setup.show(PROPOSAL).replace("nodeGroups:", "# reviewed by Bob\nnodeGroups:")
    bobs = BOB.commit(bare_remote, PROPOSAL, {MAIN_PATH: text}, "note the review")

    # The world changes so the planner would write a different proposal: it may not, only shrink or close.
    aws.autoscaling.update_auto_scaling_group(AutoScalingGroupName="general", MaxSize=6)
    result = setup.plan(capsys, setup.cluster())
    assert result.code == 0, result.err
    assert setup.head(PROPOSAL) == bobs

    closed = setup.plan(capsys, setup.cluster(busy_b=1000))
    assert closed.code == 0, closed.err
    assert setup.head(PROPOSAL) is None  # closing is always allowed


def test_approved_removal_merged_to_main_is_planned_around(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    (b_id, _) = setup.instances[1]
    assert setup.plan(capsys, setup.cluster()).code == 0
    BOB.merge(bare_remote, "main", PROPOSAL, "Merge scale-down proposal")
    git("branch", "-D", PROPOSAL, cwd=bare_remote)
    # Pending pods now need node b: the approved removal is cancelled rather than adding a node.
    result = setup.plan(capsys, setup.cluster(pending=1))
    assert result.code == 0, result.err
    group = parse_manifest(setup.show("main"), "main").group("general")
    assert group is not None and group.removal_ids == () and group.target == 2
    message = parse_message(git("log", "-1", "--format=%B", "main", cwd=bare_remote))
    assert message is not None and [str(c) for c in message.changes] == ["general 1 -> 2"]
    assert b_id not in setup.show("main")


def test_broken_manifest_on_main_refuses_to_write(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, github)
    BOB.commit(
        bare_remote,
        "main",
        {MAIN_PATH: "cluster: prod\nnodeGroups:\n  general: {desired: 9, maxSize: 5}\n"},
        "oops",
    )
    head = setup.head("main")
    result = setup.plan(capsys, setup.cluster())
    assert result.code == 2
    assert "capacity/prod.yaml:3" in result.err and "above maxSize 5" in result.err
    assert setup.head("main") == head and setup.head(PROPOSAL) is None
    assert github.writes() == []


def test_unreachable_remote_is_exit_1(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, tmp_path / "missing.git", None)
    result = setup.plan(capsys, setup.cluster())
    assert result.code == 1
    assert len(result.err.strip().splitlines()) == 1


def test_two_planners_racing_land_every_change_once(aws: MotoAws, bare_remote: Path, tmp_path: Path) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": setup.cluster(busy_b=1500, pending=2)}))
    configs = []
    for n in range(2):
        config = tmp_path / f"c{n}.yaml"
        config.write_text(
            setup.config.read_text().replace(str(tmp_path / "work"), str(tmp_path / f"work{n}"))
        )
        configs.append(config)
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "reconciler", "plan", "--config", str(c), "--snapshot", str(snapshot)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in configs
    ]
    for racer in racers:
        _, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
    log = git("log", "--format=%s", "main", cwd=bare_remote).splitlines()
    assert log == ["capacity(prod): scale up general 2 -> 4"]
    assert parse_manifest(setup.show("main"), "main").group("general").desired == 4  # type: ignore[union-attr]


def test_history_reads_back_what_plans_wrote(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    assert setup.plan(capsys, setup.cluster()).code == 0  # a proposal: in history once merged
    BOB.merge(bare_remote, "main", PROPOSAL, "Merge scale-down proposal")
    assert setup.plan(capsys, setup.cluster(pending=1)).code == 0  # cancels it: 1 -> 2 on main
    result = run(capsys, "history", "--config", str(setup.config), "--output", "json")
    assert result.code == 0, result.err
    entries = json.loads(result.out)
    changes = [(e["group"], e["from"], e["to"], e["direction"]) for e in entries]
    assert changes[:2] == [("general", 1, 2, "up"), ("general", 2, 1, "down")]
    assert entries[1]["merged_by"] == "Bob Builder"
    typo = run(capsys, "history", "--config", str(setup.config), "--node-group", "generl")
    assert typo.code == 2 and typo.err.strip() == (
        "error: --node-group: 'generl' never appears in the capacity history of cluster prod "
        "(known groups: general)"
    )
    quiet = run(capsys, "history", "--config", str(setup.config), "--node-group", "general", "--since", "0s")
    assert quiet.code == 0, quiet.err  # a known group with nothing in the window is not an error
    table = run(capsys, "history", "--config", str(setup.config), "--since", "1h")
    assert table.code == 0 and "general" in table.out
    bad = run(capsys, "history", "--config", str(setup.config), "--since", "last tuesday")
    assert bad.code == 2


def test_validate_for_pull_request_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "prod.yaml"
    good.write_text(
        "cluster: prod\nnodeGroups:\n"
        "  general: {removeInstances: [], hold: false, desired: 3, minSize: 1, maxSize: 5}\n"
    )
    assert run(capsys, "validate", str(good)).code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: prod\nnodeGroups:\n  general: {desired: -1}\n")
    result = run(capsys, "validate", str(good), str(bad))
    assert result.code == 2
    assert "bad.yaml:3" in result.err


def test_scale_up_review_mode_waits_in_a_pull_request(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, github)
    setup.config.write_text(setup.config.read_text() + "scaleUp: {review: true}\n")
    result = setup.plan(capsys, setup.cluster(busy_b=1500, pending=2))
    assert result.code == 0, result.err
    assert setup.head("main") is None  # nothing lands on main without review
    review = "asg-reconciler/prod/scale-up"
    assert parse_manifest(setup.show(review), review).group("general").desired == 4  # type: ignore[union-attr]
    assert github.pull(1).head == review and github.pull(1).state == "open"
    writes = len(github.writes())
    assert setup.plan(capsys, setup.cluster(busy_b=1500, pending=2)).code == 0
    assert len(github.writes()) == writes  # unchanged: no edit
    assert setup.plan(capsys, setup.cluster(busy_b=1500)).code == 0  # the pods are gone
    # only the bookkeeping is left to review (main has no manifest yet): the PR is rewritten in place
    assert parse_manifest(setup.show(review), review).group("general").desired == 2  # type: ignore[union-attr]
    assert github.pull(1).state == "open" and len(github.pulls) == 1


def test_approved_proposal_only_shrinks(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt3", "t3.small")
    setup = Setup(aws, tmp_path, bare_remote, github)
    aws.autoscaling.update_auto_scaling_group(AutoScalingGroupName="general", MinSize=0)
    assert setup.plan(capsys, setup.cluster()).code == 0  # proposes node b
    head = setup.head(PROPOSAL)
    assert head is not None
    github.push(PROPOSAL, head)
    github.review(1, "carol", "APPROVED")
    # Node a empties too: the planner would now also remove it, but may not add to an approved set.
    quiet = setup.cluster()
    quiet[2]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    assert setup.plan(capsys, quiet).code == 0
    assert setup.head(PROPOSAL) == head
    (b_id, _) = setup.instances[1]
    assert parse_manifest(setup.show(PROPOSAL), PROPOSAL).group("general").removal_ids == (b_id,)  # type: ignore[union-attr]


def test_history_without_a_repository_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("cluster: prod\n")
    result = run(capsys, "history", "--config", str(config))
    assert result.code == 2
    assert "c.yaml: git.url" in result.err


def test_proposal_that_stops_merging_is_rebuilt_or_reported(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, github)
    assert setup.plan(capsys, setup.cluster()).code == 0
    first = setup.head(PROPOSAL)
    # A person edits the line next to the proposal's change on main: the proposal no longer merges.
    edited = setup.show("main").replace("hold: false", "hold: false  # reviewed by Bob", 1)
    BOB.commit(bare_remote, "main", {MAIN_PATH: edited}, "note")
    assert setup.plan(capsys, setup.cluster()).code == 0
    rebuilt = setup.head(PROPOSAL)
    assert rebuilt != first
    git("merge-tree", "--write-tree", "main", PROPOSAL, cwd=bare_remote)  # merges cleanly again
    # Once a person has committed to the proposal, a new conflict is reported, not guessed at.
    BOB.commit(bare_remote, PROPOSAL, {MAIN_PATH: setup.show(PROPOSAL) + "# ok\n"}, "reviewed")
    locked = setup.head(PROPOSAL)
    edited = setup.show("main").replace("# reviewed by Bob", "# reviewed by Bob twice", 1)
    BOB.commit(bare_remote, "main", {MAIN_PATH: edited}, "note again")
    result = setup.plan(capsys, setup.cluster())
    assert result.code == 0, result.err
    assert setup.head(PROPOSAL) == locked
    assert "a person must resolve it" in result.out + result.err


# ------------------------------------------------------------------ safety rules (DESIGN §3)


def test_desired_lowered_by_hand_is_restored_and_proposed_as_a_named_instance(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 2: a person lowers main's desired without naming instances; the plan puts the number back
    on main and proposes one named instance instead."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    (b_id, _) = setup.instances[1]
    objects = setup.cluster()
    objects[3]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "800Mi"  # node b: 55%
    assert setup.plan(capsys, objects).code == 0
    assert setup.head(PROPOSAL) is None  # both nodes are above the threshold: nothing to remove
    lowered = setup.show("main").replace("desired: 2", "desired: 1", 1)
    assert lowered != setup.show("main")
    BOB.commit(bare_remote, "main", {MAIN_PATH: lowered}, "fewer nodes please")

    result = setup.plan(capsys, objects)
    assert result.code == 0, result.err
    assert parse_manifest(setup.show("main"), "main").group("general").target == 2  # type: ignore[union-attr]
    message = parse_message(git("log", "-1", "--format=%B", "main", cwd=bare_remote))
    assert message is not None and [str(c) for c in message.changes] == ["general 1 -> 2"]
    assert "desired lowered by hand without naming instances: restored" in message.reason_for("general")
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    assert "desired lowered by hand (" in github.pull(1).body


def test_approved_proposal_is_kept_when_the_planner_wants_more(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 3: once approved, new candidates wait; the proposal is not rewritten to add them."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    (b_id, _) = setup.instances[1]
    c = setup.add_instance()
    assert setup.plan(capsys, setup.cluster() + node_c(c, busy=1500)).code == 0  # proposes node b
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    head = setup.approve(github, PROPOSAL)
    writes = len(github.writes())

    result = setup.plan(capsys, setup.cluster() + node_c(c), "-o", "json")  # node c empties
    assert result.code == 0, result.err
    wanted = json.loads(result.out)["nodeGroups"][0]["removeInstances"]
    assert sorted(wanted) == sorted([b_id, c[0]])  # the planner would now remove both
    assert setup.head(PROPOSAL) == head
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    assert f"proposal {PROPOSAL} kept as is (it has approvals)" in result.err
    assert len(github.writes()) == writes
    assert github.pull(1).state == "open"


def test_locked_proposal_shrinks_with_a_commit_on_top(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 3: an approved proposal whose instance became unremovable is shrunk by a new commit on its
    head (never a rewrite), and the pull request says so."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    (b_id, _) = setup.instances[1]
    c = setup.add_instance()
    assert setup.plan(capsys, setup.cluster() + node_c(c)).code == 0
    assert sorted(setup.removal_ids(PROPOSAL)) == sorted([b_id, c[0]])
    head = setup.approve(github, PROPOSAL)

    result = setup.plan(capsys, setup.cluster() + node_c(c, busy=1500))  # node c is needed again
    assert result.code == 0, result.err
    shrunk = setup.head(PROPOSAL)
    assert shrunk is not None and shrunk != head
    assert git("log", "-1", "--format=%P", shrunk, cwd=bare_remote).split() == [head]
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    assert github.pull(1).state == "open"
    assert "shrank this proposal" in github.comments(1)[-1]


def test_an_approval_standing_after_the_bots_shrink_keeps_the_proposal_locked(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 3: the bot's own shrink moves the head past a person's approval, which still stands, so
    the next plan may not add instances to the set they approved (apply would refuse them; the
    proposal must not grow either)."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    (b_id, _) = setup.instances[1]
    c = setup.add_instance()
    assert setup.plan(capsys, setup.cluster() + node_c(c)).code == 0
    assert sorted(setup.removal_ids(PROPOSAL)) == sorted([b_id, c[0]])
    setup.approve(github, PROPOSAL)
    assert setup.plan(capsys, setup.cluster() + node_c(c, busy=1500)).code == 0  # c is needed: shrunk
    shrunk = setup.head(PROPOSAL)
    assert shrunk is not None and setup.removal_ids(PROPOSAL) == (b_id,)
    github.push(PROPOSAL, shrunk)  # GitHub sees the bot's push: carol approved an older head

    result = setup.plan(capsys, setup.cluster() + node_c(c))  # c is idle again: the plan wants b and c
    assert result.code == 0, result.err
    assert setup.head(PROPOSAL) == shrunk
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    assert f"proposal {PROPOSAL} kept as is (it has approvals)" in result.out + result.err


def test_reviewed_scale_up_is_not_rewritten(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 3 with `scaleUp.review`: once a person approved the scale-up, a different plan leaves it."""
    setup = Setup(aws, tmp_path, bare_remote, github)
    setup.config.write_text(setup.config.read_text() + "scaleUp: {review: true}\n")
    assert setup.plan(capsys, setup.cluster(busy_b=1500, pending=2)).code == 0
    assert parse_manifest(setup.show(REVIEW), REVIEW).group("general").desired == 4  # type: ignore[union-attr]
    head = setup.approve(github, REVIEW)

    result = setup.plan(capsys, setup.cluster(busy_b=1500, pending=1), "-o", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["nodeGroups"][0]["desired"] == 3  # the plan wants another size
    assert setup.head(REVIEW) == head
    assert parse_manifest(setup.show(REVIEW), REVIEW).group("general").desired == 4  # type: ignore[union-attr]
    assert f"scale-up {REVIEW} kept as is: a person has reviewed or changed it" in result.err
    assert setup.head("main") is None


def test_unneeded_time_lives_on_the_state_branch_between_runs(
    aws: MotoAws,
    bare_remote: Path,
    tmp_path: Path,
    clock: Clock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Rule 9: one-shot runs remember when a node became unneeded through the state branch."""
    setup = Setup(aws, tmp_path, bare_remote, None)
    setup.config.write_text(setup.config.read_text().replace("unneededTime: 0s", "unneededTime: 10m"))
    (b_id, _) = setup.instances[1]
    first = clock.now
    assert setup.plan(capsys, setup.cluster()).code == 0
    assert setup.head(PROPOSAL) is None  # unneeded for 0s of 10m
    assert setup.state()["since"] == {"node-b": iso(first)}

    clock.now = first + timedelta(minutes=11)
    result = setup.plan(capsys, setup.cluster())
    assert result.code == 0, result.err
    assert setup.removal_ids(PROPOSAL) == (b_id,)
    assert setup.state()["since"] == {"node-b": iso(first)}


def test_backoff_lives_on_the_state_branch_and_is_not_restarted(
    aws: MotoAws,
    bare_remote: Path,
    tmp_path: Path,
    clock: Clock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Rule 9: an instance that never registered backs the group off; the backoff is written to the
    state branch once, and a run inside it neither restarts nor rewrites it."""
    setup = Setup(aws, tmp_path, bare_remote, None)
    unregistered = [o for o in setup.cluster() if o["metadata"]["name"] != "node-b"]  # b never joined
    clock.now += timedelta(minutes=20)  # past scaleUp.maxNodeProvisionTime (15m)
    first = clock.now
    assert setup.plan(capsys, unregistered).code == 0
    backoff = {"general": {"until": iso(first + timedelta(minutes=5)), "count": 1}}
    assert setup.state()["backoffs"] == backoff
    state_head = setup.head(STATE)

    clock.now = first + timedelta(minutes=2)  # still backed off, b still unregistered
    result = setup.plan(capsys, unregistered, "-o", "json")
    assert result.code == 0, result.err
    assert (
        json.loads(result.out)["nodeGroups"][0]["backoffUntil"] == (first + timedelta(minutes=5)).isoformat()
    )
    assert setup.head(STATE) == state_head
    assert setup.state()["backoffs"] == backoff
