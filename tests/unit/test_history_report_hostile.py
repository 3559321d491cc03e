"""`history --report` against what whoever holds the plan bot's Git credentials can write: absurd
commit times and counts, apply records from year 1 or 9999, huge fleets, bidirectional overrides and
long words, duplicate manifests (review of issue 23). The page is written, never a traceback."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.domain.errors import UserError
from reconciler.gitops.fleet_history import FleetSource, ManifestFile, build_fleet
from reconciler.gitops.history import Entry, build_entries, parse_since
from reconciler.gitops.manifest import GroupEntry, Manifest, parse_manifest
from reconciler.gitops.trailers import scan_trailers
from reconciler.views.history_html import (
    MAX_CHARTS,
    MAX_EVENT_ROWS,
    MAX_HISTORY_CHARTS,
    MAX_LISTED,
    MAX_SECTIONS,
    render_report,
)

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
RLO, PDI = "\u202e", "\u2069"


def change(group: str, when: datetime, before: int, after: int, cluster: str = "prod", **kw: object) -> Entry:
    direction = "up" if after > before else "down" if after < before else "none"
    fields: dict[str, object] = {"commit": "c" * 40, "author": "bot"} | kw
    return Entry("change", cluster, group, when, before, after, direction, "why", **fields)  # type: ignore[arg-type]


def apply(group: str, when: datetime, before: int, after: int, cluster: str = "prod") -> Entry:
    return Entry(
        "apply",
        cluster,
        group,
        when,
        before,
        after,
        "up",
        "scale-up: raised",
        commit="a" * 40,
        author="apply",
    )


def manifest(path: str, cluster: str, groups: dict[str, int]) -> ManifestFile:
    lines = [f"version: 1\ncluster: {cluster}\nnodeGroups:"]
    lines += [
        f"  {g}:\n    removeInstances: []\n    hold: false\n    desired: {d}" for g, d in groups.items()
    ]
    return ManifestFile(path, parse_manifest("\n".join(lines) + "\n", path))


def page(entries: list[Entry], manifests: tuple[ManifestFile, ...] = (), **kw: object) -> str:
    source = FleetSource(tuple(sorted(entries, key=lambda e: e.time, reverse=True)), manifests)
    return render_report(build_fleet(source, now=NOW, **kw))  # type: ignore[arg-type]


def log_record(sha: str, seconds: str, message: str) -> str:
    return "\x1e" + "\x00".join((sha, "", "bot", "bot@x", "bot", seconds, message)) + "\n"


UP = "capacity(prod): scale up a 1 -> 2\n\nCapacity-Cluster: prod\nCapacity-Change: a 1 -> 2\n"


# ----------------------------------------------------------------------------- times from Git


@pytest.mark.parametrize("seconds", ["253402300800", "99999999999999999999999", "", "-5"])
def test_history_reads_a_commit_whose_time_is_absurd_or_missing(seconds: str) -> None:
    (entry,) = build_entries(log_record("s1", seconds, UP))
    assert entry.group == "a" and entry.time.tzinfo is not None


@pytest.mark.parametrize(
    "when", [datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC)]
)
def test_report_renders_a_record_from_year_1_or_9999(when: datetime) -> None:
    html = page([change("a", NOW - timedelta(days=1), 1, 2), apply("a", when, 1, 2)])
    assert html.count('<svg class="chart"') == 1


def test_a_far_future_commit_does_not_draw_thousands_of_gridlines() -> None:
    early, late = datetime(1973, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC)
    html = page([change("a", early, 1, 2), change("a", late, 2, 3)])
    assert html.count('class="grid"') <= 20


# ---------------------------------------------------------------------------- counts from Git


def test_report_renders_a_count_too_large_for_a_float() -> None:
    huge = 10**400
    html = page([change("a", NOW - timedelta(days=1), 3, huge), apply("a", NOW, 3, huge)])
    assert html.count('<svg class="chart"') == 1


def test_a_change_trailer_with_thousands_of_digits_is_not_a_change() -> None:
    scanned = scan_trailers("Capacity-Cluster: prod\nCapacity-Change: a 3 -> 1" + "0" * 5000)
    assert scanned is not None and scanned.changes == ()


# ------------------------------------------------------------------------------------ --since


@pytest.mark.parametrize("text", ["1000000d", "999999999999999999d", "0001-01-01T00:00:00+05:00"])
def test_since_out_of_range_is_a_one_line_error(text: str) -> None:
    with pytest.raises(UserError, match="--since"):
        parse_since(text, NOW)


# ------------------------------------------------------------------------- what the page says


def test_a_bidi_override_in_a_name_does_not_reorder_the_text_after_it() -> None:
    evil = f"gr{RLO}oup{PDI}{RLO}"
    html = page([change(evil, NOW - timedelta(days=1), 1, 2, cluster=f"pr{RLO}od", proposal=f"p{RLO}x")])
    assert RLO not in html and PDI not in html


def test_a_long_word_from_git_wraps_instead_of_widening_the_page() -> None:
    html = page([change("a", NOW - timedelta(days=1), 1, 2, author="x" * 3000), change("b", NOW, 1, 2)])
    assert "tr.long td{white-space:normal;overflow-wrap:anywhere}" in html
    assert html.count('<tr class="event k-change long">') == 1  # short words keep the usual layout


def test_two_manifests_naming_one_cluster_are_both_named_on_the_page() -> None:
    real = manifest("capacity/prod.yaml", "prod", {"a": 3})
    shadow = manifest("capacity/a-prod.yaml", "prod", {"a": 42})
    fleet = build_fleet(FleetSource((), (shadow, real)), now=NOW)
    (cluster,) = fleet.clusters
    assert cluster.path == "capacity/prod.yaml"
    assert cluster.groups[0].target == 3
    assert "capacity/a-prod.yaml" in cluster.problem


def test_a_fleet_of_ten_thousand_groups_builds_in_linear_time() -> None:
    parsed = Manifest("many", tuple(GroupEntry(f"g{i:05d}", 2) for i in range(10_000)), "capacity/many.yaml")
    started = time.perf_counter()
    fleet = build_fleet(FleetSource((), (ManifestFile("capacity/many.yaml", parsed),)), now=NOW)
    assert fleet.group_count == 10_000
    assert time.perf_counter() - started < 1.0  # was 4 s: a linear search of the manifest per group


# ----------------------------------------------------------------------------- the page's size


def test_a_commit_of_made_up_groups_makes_a_page_of_bounded_size() -> None:
    """Found by review (issue 28): one 620 KB commit naming 20,000 made-up groups made a 38 MB page
    (a chart each). Charts go to the groups a manifest has (and a few recent others); the others are
    listed, a bounded number, and counted; the events tables keep the newest MAX_EVENT_ROWS; one
    long reason, repeated for every group, is cut."""
    reason = "r" * 5_000
    made_up = [
        change(f"made-up-group-{i:06d}", NOW - timedelta(minutes=i), 1, 2)._replace(reason=reason)
        for i in range(20_000)
    ]
    real = manifest("capacity/prod.yaml", "prod", {"a": 3, "b": 2})
    html = page([*made_up, change("a", NOW, 1, 3)], (real,))
    assert len(html) < 6_000_000, len(html)  # was 54 MB, and 150 MB with the reason
    # a and b, the manifest's groups, and the most recently active groups no manifest has
    assert html.count("<svg") == 2 + MAX_HISTORY_CHARTS
    assert '<figure id="c1-g1">' in html and "<h3>a</h3>" in html
    assert "<h3>made-up-group-000000</h3>" in html and "<h3>made-up-group-000020</h3>" not in html
    assert f"{20_000 - MAX_HISTORY_CHARTS} node groups without a chart" in html
    assert f"{20_000 - MAX_HISTORY_CHARTS - MAX_LISTED} more node groups not listed here" in html
    assert html.count("<td>not in the manifest now</td>") == MAX_LISTED
    assert html.count('<tr class="event') == MAX_EVENT_ROWS
    assert f"{20_001 - MAX_EVENT_ROWS} older events not shown" in html
    assert "r" * 5_000 not in html and "(5,000 characters in all)" in html


def test_commits_naming_thousands_of_clusters_give_a_bounded_number_of_sections() -> None:
    entries = [
        change("g", NOW - timedelta(minutes=i), 1, 2, cluster=f"made-up-{i:05d}") for i in range(5_000)
    ]
    real = manifest("capacity/prod.yaml", "prod", {"a": 3})
    html = page([*entries, change("a", NOW, 1, 3)], (real,))
    assert html.count('<section class="cluster"') == MAX_SECTIONS
    assert "<h2>Cluster prod</h2>" in html  # the manifest's cluster comes first
    assert f"{5_001 - MAX_SECTIONS} more clusters not shown" in html
    assert len(html) < 3_000_000, len(html)


def test_a_manifest_of_thousands_of_groups_charts_a_bounded_number() -> None:
    many = manifest("capacity/prod.yaml", "prod", {f"g{i:04d}": 2 for i in range(2_000)})
    html = page([change("g0001", NOW, 1, 2)], (many,))
    assert html.count("<svg") == MAX_CHARTS
    assert html.count("<td>past the page's charts</td>") == MAX_LISTED
    assert len(html) < 3_000_000, len(html)


def test_node_group_draws_the_chart_of_a_group_no_manifest_has() -> None:
    made_up = [change(f"made-up-{i}", NOW - timedelta(minutes=i), 1, 2) for i in range(10)]
    html = page(made_up, (manifest("capacity/prod.yaml", "prod", {"a": 3}),), node_group="made-up-4")
    assert html.count("<svg") == 1 and "<h3>made-up-4</h3>" in html
    assert "without a chart" not in html
