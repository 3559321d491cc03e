"""`history --report`, the pure side: history entries and manifests in, the fleet model, then one
self-contained HTML page out (issue 23)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest

from reconciler.domain.errors import UserError
from reconciler.gitops.fleet_history import FleetSource, ManifestFile, build_fleet
from reconciler.gitops.history import Entry
from reconciler.gitops.manifest import parse_manifest
from reconciler.views.history_html import render_report

NOW = datetime(2024, 6, 10, 12, 0, tzinfo=UTC)
T0 = NOW - timedelta(days=9)
HOSTILE = '<script>alert("x")</script><img src=https://evil.example/x.png onerror=alert(1)>'


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def change(
    cluster: str, group: str, when: datetime, before: int, after: int, reason: str, **kw: object
) -> Entry:
    direction = "up" if after > before else "down" if after < before else "none"
    fields: dict[str, object] = {"commit": "c" * 40, "author": "asg-reconciler"} | kw
    return Entry("change", cluster, group, when, before, after, direction, reason, **fields)  # type: ignore[arg-type]


def apply(
    cluster: str, group: str, when: datetime, before: int, after: int, reason: str, **kw: object
) -> Entry:
    direction = "up" if after > before else "down" if after < before else "none"
    fields: dict[str, object] = {"commit": "a" * 40, "author": "asg-reconciler-apply"} | kw
    return Entry("apply", cluster, group, when, before, after, direction, reason, **fields)  # type: ignore[arg-type]


def manifest(path: str, cluster: str, groups: dict[str, tuple[int, bool, tuple[str, ...]]]) -> ManifestFile:
    lines = [f"version: 1\ncluster: {cluster}\nnodeGroups:"]
    for name, (desired, hold, removals) in groups.items():
        lines.append(
            f"  {name}:\n    removeInstances: [{', '.join(removals)}]\n    hold: {str(hold).lower()}"
        )
        lines.append(f"    desired: {desired}")
    return ManifestFile(path, parse_manifest("\n".join(lines) + "\n", path))


MANIFESTS = (
    manifest("capacity/prod.yaml", "prod", {"general": (5, False, ()), "gpu": (2, True, ())}),
    manifest("capacity/staging.yaml", "staging", {"stg-a": (3, False, ())}),
)
ENTRIES = (
    change("prod", "general", day(1), 2, 4, "3 pending pods need 2 × m5.large"),
    apply("prod", "general", day(1.01), 2, 4, "scale-up: raised desired 2 -> 4"),
    change(
        "prod",
        "general",
        day(3),
        4,
        3,
        "1 node(s) unneeded; their pods fit elsewhere",
        instances=("i-0aaa",),
        proposal="#7",
        merged_by="Alice Admin",
        opened=day(2),
    ),
    apply(
        "prod",
        "general",
        day(3.1),
        4,
        3,
        "scale-down: drained ip-1 and terminated i-0aaa",
        instances=("i-0aaa",),
    ),
    apply(
        "prod",
        "general",
        day(4),
        2,
        3,
        "scale-up: drift: desired lowered outside the tool from 3 to 2 since the last apply;"
        " raised desired 2 -> 3",
    ),
    change(
        "prod", "general", day(5), 3, 5, "cancel approved removal of i-0bbb: pending pods need the capacity"
    ),
    Entry("hold", "prod", "gpu", day(6), 2, 2, "none", "hold: true", "d" * 40, "Bob Builder"),
    Entry(
        "open",
        "prod",
        "general",
        NOW - timedelta(hours=2),
        5,
        4,
        "down",
        "1 node(s) unneeded",
        "e" * 40,
        "asg-reconciler",
        instances=("i-0ccc",),
        proposal="asg-reconciler/prod/scale-down",
        opened=NOW - timedelta(hours=2),
    ),
    change("staging", "stg-a", day(2), 2, 3, "adopted", source="external"),
    change("staging", "stg-a", day(7), 3, 3, HOSTILE, author="Mallory <b>evil</b>"),
)


def fleet(**kw: object):  # type: ignore[no-untyped-def]
    newest_first = tuple(sorted(ENTRIES, key=lambda e: e.time, reverse=True))
    return build_fleet(FleetSource(newest_first, MANIFESTS), now=NOW, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ the model


def test_every_cluster_of_the_folder_and_its_groups_now() -> None:
    model = fleet()
    assert [(c.name, [g.name for g in c.groups]) for c in model.clusters] == [
        ("prod", ["general", "gpu"]),
        ("staging", ["stg-a"]),
    ]
    general, gpu = model.clusters[0].groups
    assert (general.target, general.held, gpu.target, gpu.held) == (5, False, 2, True)
    assert general.aws_desired == 3  # as the newest apply record left it
    assert general.last_apply is not None and general.last_apply.time == day(4)
    assert general.drift is not None and "lowered outside the tool from 3 to 2" in general.drift.reason
    assert gpu.aws_desired is None and gpu.last_apply is None  # never applied: unknown, not zero


def test_the_lines_step_from_each_change_and_end_now() -> None:
    general = fleet().clusters[0].groups[0]
    assert general.target_steps == (
        (day(1), 2),
        (day(1), 4),
        (day(3), 4),
        (day(3), 3),
        (day(5), 3),
        (day(5), 5),
        (NOW, 5),
    )
    # AWS's desired: what each record found (a different value is drift) and what it left
    assert general.aws_steps == (
        (day(1.01), 2),
        (day(1.01), 4),
        (day(3.1), 4),
        (day(3.1), 3),
        (day(4), 2),
        (day(4), 3),
        (NOW, 3),
    )


def test_markers_say_what_happened() -> None:
    general = fleet().clusters[0].groups[0]
    kinds = [(m.kind, m.time) for m in general.markers]
    assert ("scale-up", day(1)) in kinds
    assert ("scale-down", day(3)) in kinds
    assert ("drift", day(4)) in kinds and ("restore", day(4)) in kinds
    assert ("cancelled", day(5)) in kinds
    stg = fleet().clusters[1].groups[0]
    assert ("adopted", day(2)) in [(m.kind, m.time) for m in stg.markers]


def test_proposals_opened_approved_applied_and_waiting() -> None:
    general = fleet().clusters[0].groups[0]
    merged, still_open = general.proposals
    assert (merged.proposal, merged.opened, merged.approved, merged.approved_by, merged.applied) == (
        "#7",
        day(2),
        day(3),
        "Alice Admin",
        day(3.1),
    )
    assert merged.waited(NOW) == timedelta(days=1) and not merged.is_open
    assert still_open.is_open and still_open.instances == ("i-0ccc",)
    assert still_open.waited(NOW) == timedelta(hours=2)
    assert fleet().clusters[0].open_proposals == (still_open,)


def test_a_squash_merged_proposal_whose_branch_was_kept_is_not_open() -> None:
    """A squash merge leaves the branch unmerged in Git's eyes; its instances on main say it landed."""
    opened = NOW - timedelta(days=1)
    branch = Entry(
        "open",
        "prod",
        "general",
        opened,
        5,
        4,
        "down",
        "idle",
        "f" * 40,
        "asg-reconciler",
        instances=("i-0ddd",),
        proposal="asg-reconciler/prod/scale-down",
        opened=opened,
    )
    squashed = change(
        "prod",
        "general",
        NOW - timedelta(hours=3),
        5,
        4,
        "idle",
        instances=("i-0ddd",),
        proposal="#9",
        merged_by="Bob Builder",
    )
    entries = tuple(sorted((*ENTRIES, branch, squashed), key=lambda e: e.time, reverse=True))
    model = build_fleet(FleetSource(entries, MANIFESTS), now=NOW)
    assert [p.instances for p in model.clusters[0].open_proposals] == [("i-0ccc",)]
    assert ("i-0ddd",) in [p.instances for p in model.clusters[0].groups[0].proposals]  # as landed


def test_holds_span_from_the_commit_that_set_them() -> None:
    gpu = fleet().clusters[0].groups[1]
    ((span),) = gpu.holds
    assert (span.start, span.end, span.by) == (day(6), None, "Bob Builder")
    # held in the manifest with no commit setting it in the history: held over the whole chart
    entries = tuple(e for e in ENTRIES if e.kind != "hold")
    model = build_fleet(FleetSource(entries, MANIFESTS), now=NOW)
    ((span),) = model.clusters[0].groups[1].holds
    assert (span.start, span.end) == (None, None)


def test_since_keeps_the_value_at_the_cutoff_and_the_events_after_it() -> None:
    model = fleet(since=day(3.5))
    general = model.clusters[0].groups[0]
    assert general.target_steps[0] == (day(3.5), 3) and general.aws_steps[0] == (day(3.5), 3)
    assert all(e.time >= day(3.5) for c in model.clusters for e in c.events)
    assert model.clusters[0].start == day(3.5)
    assert general.last_apply is not None and general.last_apply.time == day(4)


def test_node_group_filter_and_an_unknown_group() -> None:
    model = fleet(node_group="gpu")
    assert [(c.name, [g.name for g in c.groups]) for c in model.clusters] == [("prod", ["gpu"])]
    with pytest.raises(UserError, match=r"--node-group: 'nope'.*general, gpu, stg-a"):
        fleet(node_group="nope")


def test_history_of_a_cluster_without_a_manifest_and_of_a_broken_one() -> None:
    broken = ManifestFile("capacity/broken.yaml", None, "capacity/broken.yaml:3: nodeGroups: not a mapping")
    entries = (change("gone", "old", day(1), 1, 2, "pending"), *ENTRIES)
    model = build_fleet(FleetSource(entries, (*MANIFESTS, broken)), now=NOW)
    names = {c.name: c for c in model.clusters}
    assert names["gone"].path == "" and [g.name for g in names["gone"].groups] == ["old"]
    assert names["broken"].problem.startswith("capacity/broken.yaml:3")


# ------------------------------------------------------------------------------------ the page


class Page(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)


def test_the_page_is_self_contained_with_a_chart_per_group() -> None:
    html = render_report(fleet())
    page = Page(html)
    assert html.startswith("<!doctype html>")
    assert page.count("svg") == 3  # one chart per group, nothing else drawn with SVG
    assert page.count("script") == 0 and page.count("link") == 0 and page.count("iframe") == 0
    for _, attrs in page.tags:
        for key in ("src", "href", "xlink:href", "action"):
            value = attrs.get(key)
            assert value is None or value.startswith(("#", "data:")), (key, value)
    assert not re.search(r"url\(\s*['\"]?https?:", page.style) and "@import" not in page.style
    csp = [a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in str(csp[0]["content"])
    text = " ".join(page.text)
    for name in ("prod", "staging", "general", "gpu", "stg-a", "Alice Admin", "#7", "i-0ccc"):
        assert name in text


def test_git_text_is_escaped_everywhere() -> None:
    html = render_report(fleet())
    page = Page(html)
    assert HOSTILE not in html and "<b>evil</b>" not in html
    assert [t for t, _ in page.tags if t in ("img", "b", "script")] == []
    assert HOSTILE in " ".join(page.text)  # shown, as text
    assert "Mallory <b>evil</b>" in " ".join(page.text)


def test_dark_mode_print_and_markers_explained() -> None:
    page = Page(render_report(fleet()))
    assert "@media (prefers-color-scheme: dark)" in page.style and "@media print" in page.style
    classes = " ".join(str(a.get("class")) for _, a in page.tags)
    for kind in (
        "scale-up",
        "scale-down",
        "drift",
        "restore",
        "cancelled",
        "adopted",
        "opened",
        "approved",
        "applied",
    ):
        assert f"mk-{kind}" in classes, kind
    assert "hold-band" in classes
    text = " ".join(page.text)
    assert "waited 1d 0h" in text and "approved by Alice Admin" in text


def test_the_events_table_has_a_row_per_event() -> None:
    page = Page(render_report(fleet()))
    rows = [a for t, a in page.tags if t == "tr" and "event" in str(a.get("class"))]
    assert len(rows) == len(ENTRIES)


def test_an_empty_fleet_says_so() -> None:
    html = render_report(build_fleet(FleetSource((), ()), now=NOW, folder="capacity"))
    assert "no manifest in capacity/" in html and Page(html).count("svg") == 0


def test_progress_is_reported_per_group() -> None:
    seen: list[tuple[int, int]] = []
    render_report(fleet(), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
