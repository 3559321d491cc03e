"""`asg-reconciler history --report FILE.html`: one page for every cluster of the capacity repository,
from the same history as `history --output json` (issue 23)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.config.settings import load_config
from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message
from reconciler.runtime.report_stage import write_report
from tests.support.cli import run
from tests.support.git import BOT, CLUSTER, SEED_MANIFEST

STAGING = """\
version: 1
cluster: staging
nodeGroups:
  stg-a:
    removeInstances: []
    hold: false
    desired: 3
"""


@pytest.fixture
def config(seeded_remote: Path, tmp_path: Path) -> Path:
    """The seeded repo plus a scale-up of test-cluster and a second cluster's manifest beside it."""
    when = datetime.now(UTC) - timedelta(days=2)
    up = CapacityMessage(
        CLUSTER, "scale up asg-a 2 -> 4", (Change("asg-a", 2, 4),), (Reason("asg-a", "3 pending pods"),)
    )
    text = SEED_MANIFEST.replace("desired: 2 ", "desired: 4 ")
    BOT.commit(seeded_remote, "main", {f"capacity/{CLUSTER}.yaml": text}, build_message(up), when=when)
    stg = CapacityMessage(
        "staging", "scale up stg-a 1 -> 3", (Change("stg-a", 1, 3),), (Reason("stg-a", "<b>x</b>"),)
    )
    BOT.commit(
        seeded_remote,
        "main",
        {"capacity/staging.yaml": STAGING},
        build_message(stg),
        when=when + timedelta(days=1),
    )
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(f"cluster: {CLUSTER}\ngit: {{url: '{seeded_remote}', workDir: '{tmp_path / 'work'}'}}\n")
    return path


def test_report_of_every_cluster_from_the_same_history_as_json(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site" / "capacity.html"
    out.parent.mkdir()
    result = run(capsys, "history", "--config", str(config), "--report", str(out))
    assert result.code == 0, result.err
    assert result.out == f"wrote {out}: 2 clusters, 3 node groups, 2 events\n"
    assert result.err == ""  # quick: no progress lines
    html = out.read_text()
    assert html.count("<svg") == 3 and "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    sections = {s.split('"', 1)[0]: s for s in html.split('<section class="cluster" id="')[1:]}
    assert len(sections) == 2
    mine = next(s for s in sections.values() if f"<h2>Cluster {CLUSTER}" in s)
    rows = json.loads(run(capsys, "history", "--config", str(config), "--output", "json").out)
    assert len(rows) == 1 and mine.count('<tr class="event') == len(rows)
    assert rows[0]["commit"][:12] in mine

    # filters: a group, a time; the same errors as `history`, and nothing written then
    only = run(capsys, "history", "--config", str(config), "--report", str(out), "--node-group", "stg-a")
    assert only.code == 0 and only.out.endswith(": 1 cluster, 1 node group, 1 event\n")
    recent = run(capsys, "history", "--config", str(config), "--report", str(out), "--since", "30h")
    assert recent.code == 0 and recent.out.endswith(", 1 event\n")
    out.unlink()
    for args, message in (
        (("--node-group", "nope"), "--node-group: 'nope'"),
        (("--since", "yesterday-ish"), "--since 'yesterday-ish'"),
        (("--output", "json"), "--output and --report"),
    ):
        bad = run(capsys, "history", "--config", str(config), "--report", str(out), *args)
        assert bad.code == 2 and message in bad.err and "Traceback" not in bad.err, bad.err
        assert not out.exists()
    missing = tmp_path / "no-such-dir" / "x.html"
    bad = run(capsys, "history", "--config", str(config), "--report", str(missing))
    assert bad.code == 2 and f"--report {missing}" in bad.err and len(bad.err.strip().splitlines()) == 1


def test_progress_on_stderr_once_it_takes_longer_than_the_threshold(config: Path, tmp_path: Path) -> None:
    err = io.StringIO()
    summary = write_report(load_config(config), tmp_path / "r.html", progress_after=0.0, stderr=err)
    assert summary.startswith("wrote ")
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("history --report: read the history of 2 clusters")
    assert lines[-1].startswith(f"history --report: wrote {tmp_path / 'r.html'}")
    assert any("rendered 3/3 node groups" in line for line in lines)
    quiet = io.StringIO()
    write_report(load_config(config), tmp_path / "r.html", progress_after=60.0, stderr=quiet)
    assert quiet.getvalue() == ""


def test_one_commit_of_made_up_groups_makes_a_page_of_bounded_size(
    config: Path, seeded_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by review (issue 28): whoever can push wrote one 620 KB commit naming 20,000 groups no
    manifest has, and the page grew to 38 MB, a chart each. The manifests' groups are charted; the
    rest are listed and counted."""
    changes = "".join(f"Capacity-Change: made-up-{i:06d} 1 -> 2\n" for i in range(20_000))
    message = f"capacity({CLUSTER}): scale up\n\nCapacity-Cluster: {CLUSTER}\n{changes}"
    assert len(message) > 600_000
    BOT.commit(
        seeded_remote, "main", {"notes.txt": "x\n"}, message, when=datetime.now(UTC) - timedelta(hours=1)
    )
    out = tmp_path / "capacity.html"
    result = run(capsys, "history", "--config", str(config), "--report", str(out))
    assert result.code == 0, result.err
    html = out.read_text()
    assert len(html) < 2_000_000, len(html)
    mine = next(s for s in html.split('<section class="cluster"')[1:] if f"<h2>Cluster {CLUSTER}" in s)
    assert "<h3>asg-a</h3>" in mine and "<h3>asg-b</h3>" in mine  # the manifest's groups keep their charts
    assert "node groups without a chart" in mine and "more node groups not listed here" in mine
