"""`history --report`: the fleet's capacity history as one static, self-contained HTML page.

Pure: a `FleetHistory` in, a string out. Inline CSS, inline SVG charts drawn here (step lines, no
library), no script, no font, no image, nothing fetched: the page works from file://, as a CI
artifact, on GitHub Pages or attached to a ticket, and a Content-Security-Policy says so to the
browser. Every text that came from Git (commit messages, names, reasons, even group names) is
escaped: whoever can push a commit writes it. Readable in dark mode (prefers-color-scheme) and
printed (@media print). docs/history.md explains every marker.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from reconciler.domain.markdown import show_bidi
from reconciler.gitops.fleet_history import (
    ADOPTED,
    CANCELLED,
    DRIFT,
    FAILED,
    REFUSED,
    RESTORE,
    SCALE_DOWN,
    SCALE_UP,
    ClusterHistory,
    FleetHistory,
    GroupHistory,
    HoldSpan,
    Marker,
    Point,
    ProposalTrack,
)
from reconciler.gitops.history import KIND_APPLY, KIND_HOLD, KIND_OPEN, KIND_RELEASE, Entry

Progress = Callable[[int, int], None]  # (node groups charted, of how many)

# The page's bounds. Whoever can push a commit names groups: one 620 KB commit of made-up groups made
# a 38 MB page. Charts go to the groups a manifest has now (or the one --node-group asks for), at
# most MAX_CHARTS on the page, and to at most MAX_HISTORY_CHARTS groups no manifest has (a deleted
# group, a cluster whose manifest is gone: the most recently active first); the other groups are
# listed in a table, MAX_LISTED rows on the page; the events tables keep the newest MAX_EVENT_ROWS
# on the page; MAX_SECTIONS clusters get a section; a text from Git shows its first MAX_TEXT
# characters. Whatever is left out is counted on the page, with the command that shows it.
# docs/history.md.
MAX_CHARTS = 400
MAX_HISTORY_CHARTS = 20
MAX_LISTED = 1_000
MAX_EVENT_ROWS = 5_000
MAX_SECTIONS = 100
MAX_TEXT = 500


_LONG_WORD = re.compile(r"\S{60}")  # a word this long (a name from Git) may break anywhere in its row


def _row_class(*texts: str) -> str:
    """' long' for a table row holding a word that would otherwise widen the page past the window."""
    return " long" if any(len(t) >= 60 and _LONG_WORD.search(t) for t in texts) else ""


def _long_attr(*texts: str) -> str:
    return ' class="long"' if _row_class(*texts) else ""


def escape(text: str) -> str:
    """HTML-escaped, in text and in attributes, with bidirectional controls made visible (a name from
    Git would reorder a nav line, a caption, a tooltip); past MAX_TEXT characters cut, saying so (one
    commit's long reason is repeated for every group it names)."""
    if len(text) > MAX_TEXT:
        text = f"{text[:MAX_TEXT]}… ({len(text):,} characters in all)"
    return html.escape(show_bidi(text))


# the chart's geometry, in SVG units (it scales to the page's width)
WIDTH, HEIGHT = 960, 250
LEFT, RIGHT, TOP, BOTTOM = 46, 14, 14, 178  # the plot area
LANE = 200  # the proposals' lane, under the plot
TICKS_Y = 236

_VALUE_LIMIT = 10**15  # a count above it (from Git, so anything) is drawn at the top of the axis
_YEAR = timedelta(days=365)

_TIME_STEPS = (
    [timedelta(seconds=s) for s in (1, 5, 15, 30)]
    + [timedelta(minutes=m) for m in (1, 5, 15, 30)]
    + [timedelta(hours=h) for h in (1, 3, 6, 12)]
    + [timedelta(days=d) for d in (1, 2, 7, 14, 30, 91, 182, 365)]
)

_MARKER_NAMES = {
    SCALE_UP: "scale-up",
    SCALE_DOWN: "scale-down (approved)",
    CANCELLED: "approved removal cancelled",
    ADOPTED: "drift adopted into Git",
    DRIFT: "drift: desired changed outside the tool",
    RESTORE: "restored by apply",
    REFUSED: "apply refused",
    FAILED: "apply failed",
}

# nothing but this page's own inline style may load or run
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa;
--target:#0969da;--aws:#bc4c00;--up:#1a7f37;--down:#cf222e;--drift:#9a6700;--restore:#8250df;
--hold:rgba(130,80,223,.13);--wait:#8c959f}
@media (prefers-color-scheme: dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;
--panel:#151b23;--target:#4493f8;--aws:#f0883e;--up:#3fb950;--down:#f85149;--drift:#d29922;
--restore:#ab7df8;--hold:rgba(171,125,248,.2);--wait:#656c76}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1280px;padding:24px;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif}
h1{font-size:24px;margin:0 0 4px}h2,h3,nav li,figcaption,ul.proposals{overflow-wrap:anywhere}
h2{font-size:20px;margin:36px 0 6px;padding-top:10px;
border-top:2px solid var(--line)}h3{font-size:15px;margin:0}
a{color:var(--target)}.muted,.meta{color:var(--muted)}.problem{color:var(--down)}
nav ul{margin:4px 0;padding-left:18px}nav li{margin:2px 0}
table{border-collapse:collapse;width:100%;margin:8px 0 16px}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid var(--line);
unicode-bidi:isolate;overflow-wrap:break-word}
th{font-weight:600;background:var(--panel);white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}td.t,td.g{white-space:nowrap}
tr.long td{white-space:normal;overflow-wrap:anywhere}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:nowrap}
figure{margin:14px 0;padding:10px 12px;border:1px solid var(--line);border-radius:6px}
figcaption{display:flex;flex-wrap:wrap;gap:2px 18px;align-items:baseline;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
.grid{stroke:var(--line);stroke-width:1}.axis{fill:var(--muted);font-size:11px}
.target{fill:none;stroke:var(--target);stroke-width:2.2}
.aws{fill:none;stroke:var(--aws);stroke-width:2;stroke-dasharray:7 4}
.hold-band{fill:var(--hold)}.band-label{fill:var(--restore);font-size:11px}
.mk{stroke:var(--bg);stroke-width:1}.mk-scale-up{fill:var(--up)}.mk-scale-down{fill:var(--down)}
.mk-cancelled{fill:none;stroke:var(--down);stroke-width:2.2}
.mk-adopted{fill:var(--bg);stroke:var(--drift);stroke-width:2}.mk-drift{fill:var(--drift)}
.mk-restore{fill:var(--restore)}.mk-refused,.mk-failed{fill:var(--down)}
.mk-opened{fill:var(--bg);stroke:var(--target);stroke-width:2}.mk-approved{fill:var(--target)}
.mk-applied{fill:var(--up)}
.wait{stroke:var(--wait);stroke-width:3}.wait.open{stroke-dasharray:4 3}
ul.legend{display:flex;flex-wrap:wrap;gap:4px 18px;padding:0;margin:6px 0;list-style:none}
.sw{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px}
.sw-target{width:20px;height:0;border-top:3px solid var(--target);vertical-align:3px}
.sw-aws{width:20px;height:0;border-top:3px dashed var(--aws);vertical-align:3px}
.sw-scale-up{background:var(--up);clip-path:polygon(50% 0,100% 100%,0 100%)}
.sw-scale-down{background:var(--down);clip-path:polygon(0 0,100% 0,50% 100%)}
.sw-cancelled{background:var(--down);clip-path:polygon(0 15%,15% 0,50% 35%,85% 0,100% 15%,65% 50%,100% 85%,
85% 100%,50% 65%,15% 100%,0 85%,35% 50%)}
.sw-adopted{border:2px solid var(--drift);transform:rotate(45deg) scale(.8)}
.sw-drift{background:var(--drift);transform:rotate(45deg) scale(.8)}
.sw-restore{background:var(--restore);border-radius:50%}.sw-refused{background:var(--down)}
.sw-opened{border:2px solid var(--target);border-radius:50%}
.sw-approved{background:var(--target);border-radius:50%}.sw-applied{background:var(--up)}
.sw-wait{width:20px;height:0;border-top:3px solid var(--wait);vertical-align:3px}
.sw-hold{background:var(--hold);border:1px solid var(--restore)}
.badge{display:inline-block;padding:0 7px;border-radius:10px;font-size:12px;white-space:nowrap;
border:1px solid var(--line)}
.k-up{color:var(--up)}.k-down{color:var(--down)}.k-drift{color:var(--drift)}.k-hold{color:var(--restore)}
.k-open{color:var(--target)}
ul.proposals{margin:6px 0 0;padding-left:18px}
@media print{:root{--bg:#fff;--fg:#000;--muted:#444;--line:#bbb;--panel:#eee;--target:#0550ae;--aws:#953800}
body{max-width:none;padding:0;font-size:9.5pt}nav{display:none}section.cluster{break-before:page}
figure,tr{break-inside:avoid}thead{display:table-header-group}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""


def render_report(fleet: FleetHistory, progress: Progress | None = None) -> str:
    """The whole page; `progress` is told after each node group's chart."""
    shown = fleet.clusters[:MAX_SECTIONS]
    charted = _charted(shown, fleet.node_group)
    listed = _spread(MAX_LISTED, [len(c.groups) - len(n) for c, n in zip(shown, charted, strict=True)])
    rows = _spread(MAX_EVENT_ROWS, [len(c.events) for c in shown])
    total, done = sum(len(c) for c in charted), 0
    parts = [_head(fleet), _header(fleet), _nav(fleet, charted), _overview(fleet, charted), _legend()]
    for index, cluster in enumerate(shown, 1):
        parts.append(f'<section class="cluster" id="c{index}">')
        parts.append(_cluster_head(cluster))
        for number, group in enumerate(cluster.groups, 1):
            if number not in charted[index - 1]:
                continue
            parts.append(_figure(cluster, group, f"c{index}-g{number}", fleet.generated))
            done += 1
            if progress is not None:
                progress(done, total)
        parts.append(_uncharted(cluster, index, charted[index - 1], listed[index - 1]))
        parts.append(_events(cluster, fleet.generated, rows[index - 1]))
        parts.append("</section>")
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _spread(budget: int, wanted: Sequence[int]) -> list[int]:
    """How many of each one's `wanted` rows fit a page-wide `budget`, in order."""
    given = []
    for want in wanted:
        given.append(min(want, budget))
        budget -= given[-1]
    return given


def _charted(clusters: Sequence[ClusterHistory], node_group: str | None) -> list[set[int]]:
    """Per cluster, the numbers (1-based) of the groups drawn as charts: those a manifest has now or
    --node-group names, in order, MAX_CHARTS on the page; then groups no manifest has, the most
    recently active first, MAX_HISTORY_CHARTS on the page."""
    left, found = MAX_CHARTS, []
    history_only: list[tuple[datetime, int, int]] = []  # (last event, cluster, group number)
    for index, cluster in enumerate(clusters):
        numbers = set()
        for number, group in enumerate(cluster.groups, 1):
            if group.in_manifest or group.name == node_group:
                if left:
                    numbers.add(number)
                    left -= 1
            elif group.events:
                history_only.append((group.events[0].time, index, number))
        found.append(numbers)
    history_only.sort(key=lambda t: t[0], reverse=True)
    for _, index, number in history_only[: min(left, MAX_HISTORY_CHARTS)]:
        found[index].add(number)
    return found


# ------------------------------------------------------------------------------------- the page


def _head(fleet: FleetHistory) -> str:
    title = "Capacity history" + (f" — {fleet.repository}" if fleet.repository else "")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f'<meta name="generator" content="asg-reconciler history --report"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body><main>"
    )


def _header(fleet: FleetHistory) -> str:
    facts = []
    if fleet.repository:
        facts.append(f"repository <code>{escape(fleet.repository)}</code>")
    if fleet.branch:
        facts.append(f"branch <code>{escape(fleet.branch)}</code>")
    facts.append(f"manifests in <code>{escape(_folder(fleet.folder))}</code>")
    facts.append(f"generated {_time(fleet.generated)}")
    window = f"since {_time(fleet.since)}" if fleet.since else "the whole history"
    if fleet.node_group:
        window += f", node group <code>{escape(fleet.node_group)}</code> only"
    counts = (
        f"{_count(len(fleet.clusters), 'cluster')}, {_count(fleet.group_count, 'node group')}, "
        f"{_count(fleet.event_count, 'event')} ({window})"
    )
    return (
        "<header><h1>Capacity history</h1>"
        f'<p class="meta">{" · ".join(facts)}</p><p class="meta">{counts}. Times are UTC.</p></header>'
    )


def _nav(fleet: FleetHistory, charted: Sequence[set[int]]) -> str:
    if not fleet.clusters:
        return ""
    items = []
    for index, cluster in enumerate(fleet.clusters[:MAX_SECTIONS], 1):
        groups = ", ".join(
            f'<a href="#c{index}-g{number}">{escape(g.name)}</a>'
            for number, g in enumerate(cluster.groups, 1)
            if number in charted[index - 1]
        )
        rest = len(cluster.groups) - len(charted[index - 1])
        if rest:
            more = f'<a href="#c{index}-more">{_count(rest, "more node group")}</a>'
            groups = f"{groups}, {more}" if groups else more
        items.append(f'<li><a href="#c{index}">{escape(cluster.name)}</a>: {groups}</li>')
    return f"<nav><ul>{''.join(items)}</ul></nav>{_more_clusters(fleet)}"


def _more_clusters(fleet: FleetHistory) -> str:
    """The clusters past MAX_SECTIONS: named (a bounded number), counted, never drawn."""
    rest = fleet.clusters[MAX_SECTIONS:]
    if not rest:
        return ""
    names = ", ".join(f"<code>{escape(c.name)}</code>" for c in rest[:MAX_SECTIONS])
    more = f" and {len(rest) - MAX_SECTIONS:,} more" if len(rest) > MAX_SECTIONS else ""
    return (
        f'<p class="problem">{_count(len(rest), "more cluster")} not shown (the page shows '
        f"{MAX_SECTIONS}; manifests come first, then clusters only commits name): {names}{more}. "
        "<code>asg-reconciler history --output csv</code> has them all.</p>"
    )


def _uncharted(cluster: ClusterHistory, index: int, charted: set[int], room: int) -> str:
    """The groups without a chart, as table rows (`room` of them): not in any manifest now (history
    only: a deleted group, or names a commit made up), or past the page's MAX_CHARTS."""
    rest = [(n, g) for n, g in enumerate(cluster.groups, 1) if n not in charted]
    if not rest:
        return ""
    rows = []
    for _, g in rest[:room]:
        last = g.events[0] if g.events else None
        why = "past the page's charts" if g.in_manifest else "not in the manifest now"
        change = (
            f"{last.before} → {last.after}"
            if last is not None and last.before is not None and last.after is not None
            else ""
        )
        rows.append(
            f'<tr{_long_attr(g.name)}><td class="g">{escape(g.name)}</td><td>{why}</td>'
            f'<td class="n">{len(g.events)}</td><td class="t">{_time(last.time) if last else "—"}</td>'
            f'<td class="t">{change}</td></tr>'
        )
    left_out = len(rest) - len(rows)
    note = (
        f'<p class="muted">{_count(left_out, "more node group")} not listed here (the page lists '
        f"{MAX_LISTED:,}): <code>asg-reconciler history --output csv</code> has them all</p>"
        if left_out
        else ""
    )
    one = (
        '<p class="muted">One group\'s chart: <code>asg-reconciler history --report FILE --node-group '
        "NAME</code>.</p>"
    )
    return (
        f'<h3 id="c{index}-more">{_count(len(rest), "node group")} without a chart</h3>{one}'
        '<table class="events"><thead><tr><th>Node group</th><th>Why no chart</th><th>Events</th>'
        f"<th>Last event (UTC)</th><th>Last from → to</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{note}"
    )


def _overview(fleet: FleetHistory, charted: Sequence[set[int]]) -> str:
    if not fleet.clusters:
        where = _folder(fleet.folder)
        return f'<p class="muted">no manifest in {escape(where)} and no capacity history yet</p>'
    head = (
        "<thead><tr><th>Cluster</th><th>Node group</th><th>Target now</th><th>AWS desired</th>"
        "<th>Hold</th><th>Open proposals</th><th>Last apply</th><th>Drift</th></tr></thead>"
    )
    rows = []
    for index, cluster in enumerate(fleet.clusters[:MAX_SECTIONS], 1):
        name = f'<a href="#c{index}">{escape(cluster.name)}</a>'
        if cluster.problem:
            problem = escape(cluster.problem)
            tr = f"<tr{_long_attr(cluster.name, cluster.problem)}>"
            rows.append(f'{tr}<td class="g">{name}</td><td colspan="7" class="problem">{problem}</td></tr>')
        rest = len(cluster.groups) - len(charted[index - 1])
        for number, g in enumerate(cluster.groups, 1):
            if number not in charted[index - 1]:
                continue
            target = "—" if g.target is None else str(g.target)
            if g.removals:
                target += f' <span class="muted">(desired {g.desired}, removing {len(g.removals)})</span>'
            if not g.in_manifest:
                target = '<span class="muted">not in the manifest</span>'
            aws = "—" if g.aws_desired is None else str(g.aws_desired)
            if g.aws_desired is not None and g.target is not None and g.aws_desired != g.target:
                aws += ' <span class="muted">(differs from the target)</span>'
            opened = [p for p in g.proposals if p.is_open]
            open_cell = "; ".join(
                f"{escape(p.proposal or 'proposal')}: −{len(p.instances)}"
                + (f", waiting {_duration(w)}" if (w := p.waited(fleet.generated)) is not None else "")
                for p in opened
            )
            last = g.last_apply
            last_cell = (
                f'{_time(last.time)} <span class="muted">{escape(_first(last.reason))} on '
                f"<code>{escape(last.commit[:12])}</code></span>"
                if last
                else '<span class="muted">none recorded</span>'
            )
            drift = g.drift
            drift_cell = (
                f'{_time(drift.time)} <span class="muted">{escape(_drift_text(drift))}</span>'
                if drift
                else "none seen"
            )
            words = (cluster.name, g.name, *(p.proposal for p in opened), last.reason if last else "")
            tr = f"<tr{_long_attr(*words)}>"
            rows.append(
                f'{tr}<td class="g">{name}</td>'
                f'<td class="g"><a href="#c{index}-g{number}">{escape(g.name)}</a></td>'
                f'<td class="n">{target}</td><td class="n">{aws}</td><td>{"held" if g.held else "—"}</td>'
                f"<td>{open_cell or '—'}</td><td>{last_cell}</td><td>{drift_cell}</td></tr>"
            )
        if rest:
            more = f'<a href="#c{index}-more">{_count(rest, "more node group")}</a>'
            rows.append(
                f'<tr><td class="g">{name}</td><td colspan="7" class="muted">{more} without a chart '
                "(not in the manifest, or past the page's charts)</td></tr>"
            )
    table = f'<table class="overview">{head}<tbody>{"".join(rows)}</tbody></table>'
    return f'<h2 id="overview">Fleet overview</h2>{table}'


def _legend() -> str:
    items = [
        ("target", "the manifest's target (desired − removals listed)"),
        ("aws", "AWS desired, as apply recorded it"),
        ("scale-up", "scale-up committed (hover: the pods that drove it)"),
        ("scale-down", "scale-down landed (approved)"),
        ("cancelled", "approved removal cancelled"),
        ("drift", "drift: desired changed outside the tool"),
        ("adopted", "drift adopted into Git"),
        ("restore", "restored by apply"),
        ("refused", "apply refused or failed"),
        ("hold", "held in the manifest"),
        ("opened", "proposal opened"),
        ("wait", "waiting for a person / for apply"),
        ("approved", "approved (merged)"),
        ("applied", "applied: instances terminated"),
    ]
    shown = "".join(f'<li><span class="sw sw-{kind}"></span>{escape(text)}</li>' for kind, text in items)
    return f'<ul class="legend" aria-label="legend">{shown}</ul>'


def _cluster_head(cluster: ClusterHistory) -> str:
    parts = [f"<h2>Cluster {escape(cluster.name)}</h2>"]
    if cluster.path:
        parts.append(f'<p class="meta">manifest <code>{escape(cluster.path)}</code></p>')
    else:
        parts.append('<p class="meta">no manifest in the folder now: its history only</p>')
    if cluster.problem:
        parts.append(f'<p class="problem">{escape(cluster.problem)}</p>')
    return "".join(parts)


def _figure(cluster: ClusterHistory, group: GroupHistory, anchor: str, now: datetime) -> str:
    facts = [
        f"target {group.target}" if group.target is not None else "not in the manifest now",
        f"AWS {group.aws_desired}" if group.aws_desired is not None else "never applied",
    ]
    if group.held:
        facts.append("held")
    proposals = "".join(f"<li>{_proposal_text(p, now)}</li>" for p in group.proposals)
    return (
        f'<figure id="{anchor}"><figcaption><h3>{escape(group.name)}</h3>'
        f'<span class="meta">{escape(cluster.name)} · {" · ".join(facts)}</span></figcaption>'
        f"{_chart(cluster, group)}"
        + (f'<ul class="proposals">{proposals}</ul>' if proposals else "")
        + "</figure>"
    )


def _events(cluster: ClusterHistory, now: datetime, room: int) -> str:
    if not cluster.events:
        return '<p class="muted">no events in this window</p>'
    rows = [
        '<h3>Events</h3><table class="events"><thead><tr><th>Time (UTC)</th><th>Group</th><th>Event</th>'
        "<th>From → to</th><th>Details</th><th>By</th><th>Proposal</th><th>Commit</th></tr></thead><tbody>"
    ]
    for e in cluster.events[:room]:
        label, tone = _event_label(e)
        sizes = f"{e.before} → {e.after}" if e.before is not None and e.after is not None else ""
        if e.kind in (KIND_HOLD, KIND_RELEASE):
            sizes = ""
        details = escape(e.reason)
        if e.instances:
            details += f' <span class="muted">({escape(", ".join(e.instances))})</span>'
        by = escape(e.author)
        if e.merged_by:
            by += f"; approved by {escape(e.merged_by)}"
        proposal = escape(e.proposal)
        if e.opened is not None:
            waited = (now if e.kind == KIND_OPEN else e.time) - e.opened
            verb = "waiting" if e.kind == KIND_OPEN else "waited"
            proposal += f' <span class="muted">{verb} {_duration(waited)}</span>'
        long = _row_class(e.group, e.reason, e.author, e.merged_by, e.proposal, *e.instances)
        rows.append(
            f'<tr class="event k-{e.kind}{long}">'
            f'<td class="t">{_time(e.time)}</td>'
            f'<td class="g">{escape(e.group)}</td>'
            f'<td><span class="badge {tone}">{label}</span></td><td class="t">{sizes}</td><td>{details}</td>'
            f"<td>{by}</td><td>{proposal}</td><td><code>{escape(e.commit[:12])}</code></td></tr>"
        )
    rows.append("</tbody></table>")
    if len(cluster.events) > room:
        rows.append(
            f'<p class="muted">{_count(len(cluster.events) - room, "older event")} not shown (the page '
            f"holds {MAX_EVENT_ROWS:,} event rows): <code>asg-reconciler history --output csv</code>, or "
            "<code>--since</code> for a shorter window</p>"
        )
    return "".join(rows)


# ------------------------------------------------------------------------------------- the chart


class _Scale:
    def __init__(self, start: datetime, end: datetime, top_value: int) -> None:
        self.t0 = start.timestamp()
        self.span = max(end.timestamp() - self.t0, 1.0)
        self.vmax = _nice_ceiling(min(max(top_value, 1), _VALUE_LIMIT))

    def x(self, when: datetime) -> float:
        fraction = min(max((when.timestamp() - self.t0) / self.span, 0.0), 1.0)
        return round(LEFT + fraction * (WIDTH - LEFT - RIGHT), 1)

    def y(self, value: int) -> float:
        return round(BOTTOM - min(max(value, 0), self.vmax) / self.vmax * (BOTTOM - TOP), 1)


def _chart(cluster: ClusterHistory, group: GroupHistory) -> str:
    values = (
        [v for _, v in group.target_steps]
        + [v for _, v in group.aws_steps]
        + [m.value for m in group.markers]
    )
    scale = _Scale(cluster.start, cluster.end, max(values, default=1))
    label = f"{cluster.name} / {group.name}: the manifest's target and AWS's desired capacity over time"
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">',
        f"<title>{escape(label)}</title>",
        _holds(group.holds, scale),
        _axes(scale, cluster.start, cluster.end),
        _step_path(group.target_steps, scale, "target"),
        _step_path(group.aws_steps, scale, "aws"),
        "".join(_marker(m, scale) for m in group.markers),
        _lane(group.proposals, scale, cluster.end),
        "</svg>",
    ]
    return "".join(parts)


def _axes(scale: _Scale, start: datetime, end: datetime) -> str:
    parts = []
    step = _nice_step(scale.vmax)
    for value in range(0, scale.vmax + 1, step):
        y = scale.y(value)
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{value}</text>'
        )
    span = end - start
    # a commit or record dated centuries away (whoever pushes writes the date): whole years, still <= 8
    tick = next((s for s in _TIME_STEPS if span / s <= 8), _YEAR * -(-span.days // (8 * 365)))
    first = datetime.fromtimestamp(
        (start.timestamp() // tick.total_seconds() + 1) * tick.total_seconds(), UTC
    )
    fmt = "%Y-%m-%d" if tick >= timedelta(days=1) else "%H:%M" if tick >= timedelta(minutes=1) else "%H:%M:%S"
    when = first
    while when <= end:
        x = scale.x(when)
        text = when.strftime(fmt)
        if fmt == "%H:%M" and when.hour == 0 and when.minute == 0:
            text = when.strftime("%b %d")
        parts.append(
            f'<line class="grid" x1="{x}" y1="{TOP}" x2="{x}" y2="{BOTTOM}"/>'
            f'<text class="axis" x="{x}" y="{TICKS_Y}" text-anchor="middle">{text}</text>'
        )
        if end - when < tick:  # the next tick is past the end, maybe past year 9999
            break
        when += tick
    parts.append(f'<text class="axis" x="{LEFT - 6}" y="{LANE + 4}" text-anchor="end">PR</text>')
    return "".join(parts)


def _step_path(points: Sequence[Point], scale: _Scale, css: str) -> str:
    if not points:
        return ""
    d = [f"M{scale.x(points[0][0])} {scale.y(points[0][1])}"]
    for when, value in points[1:]:
        d.append(f"H{scale.x(when)}V{scale.y(value)}")
    return f'<path class="{css}" d="{"".join(d)}"/>'


def _marker(m: Marker, scale: _Scale) -> str:
    x, y = scale.x(m.time), scale.y(m.value)
    title = f"<title>{escape(_marker_text(m))}</title>"
    css = f"mk mk-{m.kind}"
    if m.kind == SCALE_UP:
        return (
            f'<polygon class="{css}" points="{x},{y - 6} {x - 5},{y + 3} {x + 5},{y + 3}">{title}</polygon>'
        )
    if m.kind == SCALE_DOWN:
        return (
            f'<polygon class="{css}" points="{x},{y + 6} {x - 5},{y - 3} {x + 5},{y - 3}">{title}</polygon>'
        )
    if m.kind == CANCELLED:
        return f'<path class="{css}" d="{_cross(x, y)}">{title}</path>'
    if m.kind in (DRIFT, ADOPTED):
        diamond = f"{x},{y - 6} {x + 6},{y} {x},{y + 6} {x - 6},{y}"
        return f'<polygon class="{css}" points="{diamond}">{title}</polygon>'
    if m.kind == RESTORE:
        return f'<circle class="{css}" cx="{x}" cy="{y}" r="5">{title}</circle>'
    return f'<rect class="{css}" x="{x - 4}" y="{y - 4}" width="8" height="8">{title}</rect>'


def _cross(x: float, y: float) -> str:
    return f"M{x - 4} {y - 4}L{x + 4} {y + 4}M{x - 4} {y + 4}L{x + 4} {y - 4}"


def _holds(spans: Sequence[HoldSpan], scale: _Scale) -> str:
    parts = []
    for span in spans:
        x1 = scale.x(span.start) if span.start else LEFT
        x2 = scale.x(span.end) if span.end else WIDTH - RIGHT
        who = f" by {span.by}" if span.by else ""
        since = f" from {_time(span.start)}" if span.start else " (set before this history)"
        until = f" until {_time(span.end)}" if span.end else ", still held"
        text = f"held in the manifest{who}{since}{until}" + (f": {span.reason}" if span.reason else "")
        parts.append(
            f'<rect class="hold-band" x="{x1}" y="{TOP}" width="{max(x2 - x1, 2):.1f}" '
            f'height="{BOTTOM - TOP}">'
            f"<title>{escape(text)}</title></rect>"
            f'<text class="band-label" x="{x1 + 4}" y="{TOP + 12}">held</text>'
        )
    return "".join(parts)


def _lane(tracks: Sequence[ProposalTrack], scale: _Scale, end: datetime) -> str:
    parts = []
    for t in tracks:
        title = f"<title>{escape(_proposal_plain(t, end))}</title>"
        x_open = scale.x(t.opened) if t.opened else None
        x_ok = scale.x(t.approved) if t.approved else None
        done = t.applied or t.cancelled
        x_done = scale.x(done) if done else None
        shapes = []
        if x_open is not None:
            stop = x_ok if x_ok is not None else scale.x(end)
            css = "wait" if x_ok is not None else "wait open"
            shapes.append(f'<line class="{css}" x1="{x_open}" y1="{LANE}" x2="{stop}" y2="{LANE}"/>')
        if x_ok is not None and x_done is not None:
            shapes.append(f'<line class="wait" x1="{x_ok}" y1="{LANE}" x2="{x_done}" y2="{LANE}"/>')
        if x_open is not None:
            shapes.append(f'<circle class="mk mk-opened" cx="{x_open}" cy="{LANE}" r="4.5"/>')
        if x_ok is not None:
            shapes.append(f'<circle class="mk mk-approved" cx="{x_ok}" cy="{LANE}" r="4.5"/>')
        if t.applied is not None and x_done is not None:
            shapes.append(
                f'<rect class="mk mk-applied" x="{x_done - 4.5}" y="{LANE - 4.5}" width="9" height="9"/>'
            )
        elif t.cancelled is not None and x_done is not None:
            shapes.append(f'<path class="mk mk-cancelled" d="{_cross(x_done, LANE)}"/>')
        parts.append(f'<g class="proposal">{title}{"".join(shapes)}</g>')
    return "".join(parts)


# ------------------------------------------------------------------------------------- the words


def _marker_text(m: Marker) -> str:
    e = m.entry
    head = f"{_time(m.time)} {_MARKER_NAMES[m.kind]}"
    if e.kind == KIND_APPLY:
        return f"{head}: AWS {e.before} → {e.after}; {e.reason} (apply on {e.commit[:12]})"
    by = f"; approved by {e.merged_by}" if e.merged_by else ""
    return f"{head}: target {e.before} → {e.after}; {e.reason} ({e.author}, {e.commit[:12]}{by})"


def _proposal_plain(t: ProposalTrack, now: datetime) -> str:
    name = t.proposal or "scale-down"
    parts = [f"{name}: remove {', '.join(t.instances) or 'instances'}"]
    if t.before is not None and t.after is not None:
        parts.append(f"target {t.before} → {t.after}")
    parts.append(f"opened {_time(t.opened)}" if t.opened else "opened: not recorded (squash merge)")
    waited = t.waited(now)
    if t.is_open:
        parts.append("open" + (f", waiting {_duration(waited)}" if waited is not None else ""))
    else:
        who = f" by {t.approved_by}" if t.approved_by else ""
        wait = f", waited {_duration(waited)}" if waited is not None else ""
        parts.append(f"approved{who} {_time(t.approved)}{wait}")
    if t.applied:
        parts.append(f"applied {_time(t.applied)}")
    elif t.cancelled:
        parts.append(f"cancelled {_time(t.cancelled)}")
    elif not t.is_open:
        parts.append("not applied yet")
    return "; ".join(parts)


def _proposal_text(t: ProposalTrack, now: datetime) -> str:
    return escape(_proposal_plain(t, now))


def _event_label(e: Entry) -> tuple[str, str]:
    if e.kind == KIND_HOLD:
        return "hold set", "k-hold"
    if e.kind == KIND_RELEASE:
        return "hold lifted", "k-hold"
    if e.kind == KIND_OPEN:
        return "proposal open", "k-open"
    if e.kind == KIND_APPLY:
        if "drift:" in e.reason:
            return "apply: drift", "k-drift"
        action = _first(e.reason)
        tone = (
            "k-up"
            if e.direction == "up"
            else "k-down"
            if action in (REFUSED, FAILED) or e.direction == "down"
            else ""
        )
        return f"apply: {escape(action)}", tone
    if "cancel approved removal" in e.reason:
        return "cancelled removal", "k-up"
    if e.source == "external":
        return "drift adopted", "k-drift"
    return {"up": ("scale-up", "k-up"), "down": ("scale-down", "k-down")}.get(e.direction, ("change", ""))


def _drift_text(e: Entry) -> str:
    if e.kind == KIND_APPLY:
        note = next((p for p in e.reason.split("; ") if "drift:" in p), e.reason)
        return note.split("drift: ", 1)[-1]
    return f"adopted {e.before} → {e.after}"


def _first(reason: str) -> str:
    """An apply record's action: its reason starts with it (`scale-up: raised desired 1 -> 3`)."""
    return reason.split(":", 1)[0].split(" (", 1)[0]


def _time(when: datetime | None) -> str:
    """UTC to the second (the page says times are UTC); isoformat: 10,000s of rows."""
    if when is None:
        return ""
    if when.utcoffset():
        when = when.astimezone(UTC)
    return when.isoformat(" ", "seconds")[:19]


def _duration(span: timedelta) -> str:
    seconds = max(int(span.total_seconds()), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _folder(folder: str) -> str:
    return f"{folder.strip('/')}/" if folder.strip("/") else "the repository's top folder"


def _nice_ceiling(value: int) -> int:
    """The top of the y axis: at least 10% above the highest value, on a round step."""
    raw = value * 1.1
    step = _nice_step(int(raw) or 1)
    return int(-(-raw // step) * step)


def _nice_step(top: int) -> int:
    """A 1-2-5 step giving at most five gridlines up to `top`."""
    step = 1
    while top / step > 5:
        for factor in (2, 2.5, 2):
            step = int(step * factor)
            if top / step <= 5:
                break
    return step
