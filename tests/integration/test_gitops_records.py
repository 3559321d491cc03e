"""Apply records as git notes on real bare repositories: round trips, first parents, races, bad notes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reconciler.config.settings import GitConfig
from reconciler.domain.errors import OperationError
from reconciler.gitops.history import history_command
from reconciler.gitops.record_reading import history_entries, last_scale_up
from reconciler.gitops.record_signing import Signer, Verifier
from reconciler.gitops.record_store import append_record, last_applied, read_records, read_trusted_records
from reconciler.gitops.records import DEFAULT_APPLIER, NOTES_REF, ApplyRecord, GroupRecord, record_digest
from reconciler.gitops.repo import Identity, WorkingCopy
from tests.support.git import ALICE, BOB, BOT, CLUSTER, GitServer, git

IDENTITY = Identity(BOT.name, BOT.email)
APPLIER = Identity("apply-prod", "apply-prod@example.com")
T = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
FAST = {"wait_initial": 0.01, "wait_max": 0.05}


def copy_of(remote: Path | str, work: Path) -> WorkingCopy:
    copy = WorkingCopy(str(remote), work, IDENTITY)
    copy.sync()
    return copy


def record(commit: str, at: datetime, complete: bool = True, *groups: GroupRecord) -> ApplyRecord:
    return ApplyRecord(
        commit, at, complete, groups or (GroupRecord("asg-a", "scale-up", 2, 3),), cluster=CLUSTER
    )


def main_tip(remote: Path) -> str:
    return git("rev-parse", "refs/heads/main", cwd=remote).strip()


def remote_note(remote: Path, commit: str) -> str:
    return git("notes", "--ref=asg-reconciler", "show", commit, cwd=remote)


def notes_log(remote: Path) -> list[list[str]]:
    """The remote notes ref's commits, newest first, each as [sha, *parents]."""
    return [line.split() for line in git("log", "--format=%H %P", NOTES_REF, cwd=remote).splitlines()]


def test_round_trip_and_readable_by_hand(seeded_remote: Path, tmp_path: Path) -> None:
    sha = main_tip(seeded_remote)
    copy = copy_of(seeded_remote, tmp_path / "apply")
    assert read_records(copy, "main") == {} and last_applied(copy, "main") is None  # no notes ref yet
    rec = record(
        sha,
        T,
        True,
        GroupRecord("asg-a", "scale-up", 2, 4),
        GroupRecord("asg-b", "scale-down", 3, 2, ("i-0123456789abcdef0",), "drained ip-10-0-1-2"),
    )
    notes_commit = append_record(copy, rec, applier=APPLIER, **FAST)
    assert notes_commit is not None
    assert git("rev-parse", NOTES_REF, cwd=seeded_remote).strip() == notes_commit

    # a person reads it with plain git
    shown = remote_note(seeded_remote, sha)
    assert shown.startswith('{\n  "records": [\n') and shown.endswith('  "version": 1\n}\n')
    data = json.loads(shown)
    assert data["version"] == 1 and data["records"][0]["groups"][1]["terminated"] == ["i-0123456789abcdef0"]
    assert data["records"][0]["applier"] == "apply-prod"  # filled from the applier identity
    who = git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", NOTES_REF, cwd=seeded_remote)
    assert who.startswith("apply-prod <apply-prod@example.com>|apply-prod <apply-prod@example.com>|")
    assert f"apply({CLUSTER}): {sha[:12]} complete" in who and "drained" not in who

    # another machine reads the same records back
    other = copy_of(seeded_remote, tmp_path / "other")
    got = read_records(other, "main")
    assert list(got) == [sha] and got[sha] == [replace(rec, applier="apply-prod")]
    assert got.warnings == ()
    assert last_applied(other, "main") == (sha, got[sha][0])
    assert last_applied(other, "main", cluster="another-cluster") is None
    assert last_scale_up(got) == {"asg-a": T}

    # the same record again writes nothing
    assert append_record(other, got[sha][0], applier=APPLIER, **FAST) is None
    assert len(notes_log(seeded_remote)) == 1


def test_default_applier_and_history_sees_the_records(seeded_remote: Path, tmp_path: Path) -> None:
    sha = main_tip(seeded_remote)
    copy = copy_of(seeded_remote, tmp_path / "apply")
    append_record(copy, record(sha, T, False, GroupRecord("asg-b", "failed", 1, 1, (), "throttled")), **FAST)
    who = git("log", "-1", "--format=%an <%ae>", NOTES_REF, cwd=seeded_remote).strip()
    assert who == f"{DEFAULT_APPLIER.name} <{DEFAULT_APPLIER.email}>"
    # `history` runs git log in the work dir: the fetched notes ref is where it looks
    reader = copy_of(seeded_remote, tmp_path / "reader")
    read_records(reader, "main")
    entries = history_command(
        reader.path, CLUSTER, ref="refs/remotes/origin/main", note_entries=history_entries
    )
    applied = [e for e in entries if e.kind == "apply"]
    assert [(e.group, e.reason, e.author, e.commit) for e in applied] == [
        ("asg-b", "failed: throttled (partial apply)", DEFAULT_APPLIER.name, sha)
    ]


def test_only_the_first_parent_line_counts(seeded_remote: Path, tmp_path: Path) -> None:
    c1 = main_tip(seeded_remote)
    ALICE.commit(seeded_remote, "side", {"side.txt": "x\n"}, "side work", parents=[c1])
    side = git("rev-parse", "refs/heads/side", cwd=seeded_remote).strip()
    c2 = BOT.commit(seeded_remote, "main", {"a.txt": "2\n"}, "capacity: c2")
    merge = BOB.merge(seeded_remote, "main", "side", "Merge branch 'side'")
    c3 = BOT.commit(seeded_remote, "main", {"a.txt": "3\n"}, "capacity: c3")

    copy = copy_of(seeded_remote, tmp_path / "apply")
    assert copy.first_parent("main") == [c3, merge, c2, c1]
    assert copy.first_parent("main", since=c2) == [c3, merge]
    assert copy.first_parent(merge) == [merge, c2, c1]
    assert copy.first_parent("no-such-branch") == []

    append_record(copy, record(c1, T), **FAST)
    append_record(copy, record(c2, T + timedelta(minutes=1)), **FAST)
    # the side branch's commit is applied last and completely, yet it is not on main's line
    append_record(
        copy, record(side, T + timedelta(minutes=9), True, GroupRecord("asg-z", "scale-up", 0, 5)), **FAST
    )
    append_record(copy, record(merge, T + timedelta(minutes=3), False), **FAST)
    append_record(copy, record(c3, T + timedelta(minutes=4), False), **FAST)

    got = read_records(copy, "main")
    assert list(got) == [c3, merge, c2, c1] and side not in got
    found = last_applied(copy, "main")
    assert found is not None and found[0] == c2
    assert "asg-z" not in last_scale_up(got)
    assert last_scale_up(got)["asg-a"] == T + timedelta(minutes=4)
    # asked about the side branch itself, its record is there
    assert last_applied(copy, side) == (side, read_records(copy, side)[side][0])


def _race_before_our_first_push(
    monkeypatch: pytest.MonkeyPatch, ours: WorkingCopy, theirs: WorkingCopy, their_record: ApplyRecord
) -> list[str | None]:
    """Make `theirs` push `their_record` right after `ours` fetched the notes for the first time."""
    fetched: list[str | None] = []
    original = ours.fetch_notes

    def fetch_then_race(ref: str) -> str | None:
        tip = original(ref)
        fetched.append(tip)
        if len(fetched) == 1:
            append_record(theirs, their_record, applier=Identity("apply-b", "b@example.com"), **FAST)
        return tip

    monkeypatch.setattr(ours, "fetch_notes", fetch_then_race)
    return fetched


@pytest.mark.parametrize("same_commit", [True, False], ids=["same-commit", "different-commits"])
def test_two_appliers_racing_both_land(
    seeded_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_commit: bool
) -> None:
    first = main_tip(seeded_remote)
    second = BOT.commit(seeded_remote, "main", {"a.txt": "2\n"}, "capacity: 2")
    ours = copy_of(seeded_remote, tmp_path / "a")
    theirs = copy_of(seeded_remote, tmp_path / "b")
    append_record(ours, record(first, T - timedelta(hours=1)), **FAST)  # the notes ref exists already
    before = notes_log(seeded_remote)

    their_record = record(second if same_commit else first, T, False, GroupRecord("asg-b", "failed", 1, 1))
    our_record = record(second, T + timedelta(seconds=30), True)
    fetched = _race_before_our_first_push(monkeypatch, ours, theirs, their_record)
    ours_commit = append_record(ours, our_record, applier=APPLIER, **FAST)

    assert len(fetched) == 2  # rejected once, fetched again, appended on top
    log = notes_log(seeded_remote)
    assert len(log) == 3 and log[-1] == before[0] == [before[0][0]]
    # never forced: ours is a child of theirs, which is a child of the first
    assert log[0] == [ours_commit, log[1][0]] and log[1][1:] == [before[0][0]]
    got = read_records(copy_of(seeded_remote, tmp_path / "c"), "main")
    if same_commit:
        assert [(r.applier, r.complete) for r in got[second]] == [("apply-b", False), ("apply-prod", True)]
    else:
        assert [r.applier for r in got[second]] == ["apply-prod"]
        assert [(r.applier, r.complete) for r in got[first]] == [
            (DEFAULT_APPLIER.name, True),
            ("apply-b", False),
        ]
    assert last_applied(theirs, "main") == (second, got[second][-1])


def test_the_notes_ref_created_by_two_appliers_at_once(
    seeded_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = main_tip(seeded_remote)
    ours = copy_of(seeded_remote, tmp_path / "a")
    theirs = copy_of(seeded_remote, tmp_path / "b")
    fetched = _race_before_our_first_push(monkeypatch, ours, theirs, record(sha, T))
    append_record(ours, record(sha, T + timedelta(minutes=1)), **FAST)
    assert fetched[0] is None and fetched[1] is not None  # first no ref at all, then theirs
    assert [r["appliedAt"] for r in json.loads(remote_note(seeded_remote, sha))["records"]] == [
        "2024-06-01T12:00:00Z",
        "2024-06-01T12:01:00Z",
    ]


def test_a_writer_that_keeps_losing_gives_up_without_forcing(
    seeded_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = main_tip(seeded_remote)
    ours = copy_of(seeded_remote, tmp_path / "a")
    theirs = copy_of(seeded_remote, tmp_path / "b")
    original = ours.fetch_notes
    count = iter(range(100))

    def always_race(ref: str) -> str | None:
        tip = original(ref)
        append_record(theirs, record(sha, T + timedelta(minutes=next(count))), **FAST)
        return tip

    monkeypatch.setattr(ours, "fetch_notes", always_race)
    with pytest.raises(OperationError, match="rejected 3 times"):
        append_record(ours, record(sha, T - timedelta(days=1)), attempts=3, **FAST)
    stored = json.loads(remote_note(seeded_remote, sha))["records"]
    assert len(stored) == 3 and all(r["appliedAt"] != "2024-05-31T12:00:00Z" for r in stored)


def test_many_appliers_at_once_lose_nothing(seeded_remote: Path, tmp_path: Path) -> None:
    first = main_tip(seeded_remote)
    second = BOT.commit(seeded_remote, "main", {"a.txt": "2\n"}, "capacity: 2")
    copies = [copy_of(seeded_remote, tmp_path / f"w{n}") for n in range(3)]
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            for k in range(3):
                commit = (first, second)[(n + k) % 2]
                at = T + timedelta(minutes=10 * n + k)
                append_record(copies[n], record(commit, at), attempts=30, wait_initial=0.01, wait_max=0.1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    got = read_records(copy_of(seeded_remote, tmp_path / "reader"), "main")
    times = sorted(r.applied_at for found in got.values() for r in found)
    assert times == sorted(T + timedelta(minutes=10 * n + k) for n in range(3) for k in range(3))
    assert len(notes_log(seeded_remote)) == 9  # one notes commit per append, none lost or forced


def test_a_corrupt_note_is_skipped_with_a_warning(
    seeded_remote: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    c1 = main_tip(seeded_remote)
    c2 = BOT.commit(seeded_remote, "main", {"a.txt": "2\n"}, "capacity: 2")
    copy = copy_of(seeded_remote, tmp_path / "apply")
    append_record(copy, record(c1, T), **FAST)
    git("notes", "--ref=asg-reconciler", "add", "-m", "applied it {by hand", c2, cwd=seeded_remote)

    with caplog.at_level(logging.WARNING, logger="reconciler.gitops.records"):
        got = read_records(copy, "main")
    assert list(got) == [c1]
    assert len(got.warnings) == 1 and c2[:12] in got.warnings[0] and "not JSON" in got.warnings[0]
    assert any(c2[:12] in r.getMessage() for r in caplog.records)
    assert last_applied(copy, "main") == (c1, got[c1][0])

    # recording on that commit replaces the broken note; the old one stays in the notes history
    append_record(copy, record(c2, T + timedelta(minutes=1)), **FAST)
    now = last_applied(copy, "main")
    assert now is not None and now[0] == c2 and now[1].applied_at == T + timedelta(minutes=1)
    previous = notes_log(seeded_remote)[1][0]
    assert git("cat-file", "blob", f"{previous}:{c2}", cwd=seeded_remote) == "applied it {by hand\n"


def test_missing_or_deleted_notes_ref_is_no_records(seeded_remote: Path, tmp_path: Path) -> None:
    sha = main_tip(seeded_remote)
    copy = copy_of(seeded_remote, tmp_path / "apply")
    assert copy.fetch_notes(NOTES_REF) is None
    assert copy.read_note(NOTES_REF, sha) is None and copy.read_notes(NOTES_REF) == {}
    append_record(copy, record(sha, T), **FAST)
    assert copy.read_note(NOTES_REF, sha) == remote_note(seeded_remote, sha)
    git("update-ref", "-d", NOTES_REF, cwd=seeded_remote)
    assert read_records(copy, "main") == {}  # the stale local copy went with it
    assert git("for-each-ref", "refs/notes", cwd=copy.path) == ""


def test_notes_over_https_keep_the_token_out(git_http: GitServer, tmp_path: Path) -> None:
    remote = git_http.root / "cap.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    git("config", "http.receivepack", "true", cwd=remote)
    sha = ALICE.commit(remote, "main", {"f.yaml": "a: 1\n"}, "first")
    config = GitConfig(url=git_http.url("cap.git"), token_env="CAP_TOKEN")
    copy = WorkingCopy.from_config(
        config, tmp_path / "work", environ={**os.environ, "CAP_TOKEN": git_http.token}
    )
    copy.sync()
    detail = f"AWS said: bad credentials {git_http.token}"
    append_record(copy, record(sha, T, False, GroupRecord("asg-a", "failed", 1, 1, (), detail)), **FAST)
    note = remote_note(remote, sha)
    assert git_http.token not in note and "bad credentials ***" in note
    everything = subprocess.run(
        ["git", "log", "-p", NOTES_REF], cwd=remote, capture_output=True, text=True, check=True
    ).stdout
    assert git_http.token not in everything
    got = read_records(copy, "main")
    assert got[sha][0].groups[0].detail == "AWS said: bad credentials ***"


# ------------------------------------------------------------------ signed records (issue 8, hole 6)

APPLY_KEY = Signer(Ed25519PrivateKey.generate())
TRUSTED = Verifier([APPLY_KEY.public_key])


def signed(copy: WorkingCopy, rec: ApplyRecord, previous: str = "") -> str:
    """Append `rec` signed and chained to `previous`, as apply does; its digest (the next anchor)."""
    rec = replace(rec, previous=previous, run="run-1")
    append_record(copy, rec, signer=APPLY_KEY, **FAST)
    return record_digest(rec, copy=copy)


def test_a_record_off_the_first_parent_line_still_counts(seeded_remote: Path, tmp_path: Path) -> None:
    """Hole 2: apply applied W; the bot pushes Z with parents [M, W], a fast-forward whose
    first-parent line skips W. The trusted reading still sees W as the commit apply acted on last."""
    m = main_tip(seeded_remote)
    w = BOB.commit(seeded_remote, "main", {"a.txt": "withdrawn\n"}, "withdraw")
    copy = copy_of(seeded_remote, tmp_path / "apply")
    anchor = signed(copy, record(w, T))
    tree = git("rev-parse", f"{m}^{{tree}}", cwd=seeded_remote).strip()
    z = git("commit-tree", tree, "-p", m, "-p", w, "-m", "replay", cwd=seeded_remote, env=BOB.env()).strip()
    git("update-ref", "refs/heads/main", z, w, cwd=seeded_remote)

    reader = copy_of(seeded_remote, tmp_path / "reader")
    assert w not in reader.first_parent("main") and read_records(reader, "main") == {}
    trust = read_trusted_records(reader, CLUSTER, TRUSTED, anchor, fetch=True)
    assert trust.problems == () and trust.last_acted_on() == w and trust.latest_digest == anchor


def test_the_bot_rewinding_or_deleting_the_notes_ref_is_a_problem(
    seeded_remote: Path, tmp_path: Path
) -> None:
    c1 = main_tip(seeded_remote)
    c2 = BOT.commit(seeded_remote, "main", {"a.txt": "2\n"}, "capacity: c2")
    copy = copy_of(seeded_remote, tmp_path / "apply")
    first = signed(copy, record(c1, T))
    older_ref = git("rev-parse", NOTES_REF, cwd=seeded_remote).strip()
    anchor = signed(copy, record(c2, T + timedelta(minutes=1)), first)
    assert (
        append_record(
            copy,
            replace(record(c2, T + timedelta(minutes=1)), previous=first, run="run-1"),
            signer=APPLY_KEY,
            **FAST,
        )
        is None
    )  # the same signed record again: nothing new
    good = read_trusted_records(copy, CLUSTER, TRUSTED, anchor, fetch=True)
    assert good.problems == () and [r.commit for r in good.records] == [c2, c1]

    reader = copy_of(seeded_remote, tmp_path / "reader")
    git("update-ref", NOTES_REF, older_ref, cwd=seeded_remote)  # a force-push to an older state
    rewound = read_trusted_records(reader, CLUSTER, TRUSTED, anchor, fetch=True)
    assert len(rewound.problems) == 1 and f"digest {anchor[:12]}" in rewound.problems[0]
    assert rewound.last_acted_on() == c1  # never newer than what is really there

    git("update-ref", "-d", NOTES_REF, cwd=seeded_remote)  # deleted outright
    deleted = read_trusted_records(reader, CLUSTER, TRUSTED, anchor, fetch=True)
    assert len(deleted.problems) == 1 and deleted.last_acted_on() is None
    assert deleted.latest_digest == anchor


def test_a_signed_record_with_the_token_in_a_detail_still_verifies(
    git_http: GitServer, tmp_path: Path
) -> None:
    """The token (or URL credentials) is masked before signing, so what is stored is what was signed
    and `record_digest(..., copy=...)` is the stored record's digest."""
    remote = git_http.root / "cap.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    git("config", "http.receivepack", "true", cwd=remote)
    sha = ALICE.commit(remote, "main", {"f.yaml": "a: 1\n"}, "first")
    config = GitConfig(url=git_http.url("cap.git"), token_env="CAP_TOKEN")
    copy = WorkingCopy.from_config(
        config, tmp_path / "work", environ={**os.environ, "CAP_TOKEN": git_http.token}
    )
    copy.sync()
    detail = f"AWS said: bad credentials {git_http.token} at https://u:p@example.com/x"
    anchor = signed(copy, record(sha, T, False, GroupRecord("asg-a", "failed", 1, 1, (), detail)))
    assert git_http.token not in remote_note(remote, sha)
    trust = read_trusted_records(copy, CLUSTER, TRUSTED, anchor)
    assert trust.problems == () and trust.warnings == ()
    assert trust.latest is not None and trust.latest.groups[0].detail == (
        "AWS said: bad credentials *** at https://***@example.com/x"
    )
