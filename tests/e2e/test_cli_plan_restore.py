"""A desired lowered by hand on main with no instance removable (issue 20): the plan changes nothing in
AWS ("none"), puts the number back on main, and says so; the commit is a restore, and `history`
shows it as one, not as a scale-up (DESIGN §3 rule 2: a decrease is only ever named instances)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.gitops.trailers import parse_message
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import BOB, git
from tests.support.plan_git_world import MAIN_PATH, Setup


def test_a_hand_lowered_desired_nothing_can_leave_is_restored_and_history_says_restore(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    busy = setup.cluster(busy_b=1500)  # both nodes busy: no instance is removable
    assert setup.plan(capsys, busy).code == 0
    BOB.commit(
        bare_remote, "main", {MAIN_PATH: setup.show("main").replace("desired: 2", "desired: 1", 1)}, "less"
    )

    result = setup.plan(capsys, busy)
    assert result.code == 0, result.err
    assert "no change" in result.out  # nothing changes in AWS
    assert "restored general 1 -> 2 on main: desired lowered by hand without naming instances" in result.out
    message_text = git("log", "-1", "--format=%B", "main", cwd=bare_remote)
    assert message_text.startswith("capacity(prod): restore general 1 -> 2\n"), message_text
    message = parse_message(message_text)
    assert message is not None and message.restores == ("general",)
    assert [str(c) for c in message.changes] == ["general 1 -> 2"]

    shown = run(capsys, "history", "--config", str(setup.config), "--output", "json")
    assert shown.code == 0, shown.err
    entries = [e for e in json.loads(shown.out) if e["kind"] == "change"]
    assert entries[0]["direction"] == "restore" and (entries[0]["from"], entries[0]["to"]) == (1, 2)
    table = run(capsys, "history", "--config", str(setup.config))
    restored = next(line for line in table.out.splitlines() if "1 -> 2" in line)
    assert " restore " in restored and " up " not in restored
