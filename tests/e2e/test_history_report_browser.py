"""The acceptance check of issue 23, as its reviewers run it: the capacity repository `asg-reconciler
demo` leaves behind, a second cluster's commits added by hand (another manifest in capacity/, with
trailers, a hostile reason and an apply record), `history --report`, and Debian's Chromium headless
rendering the page from file://: every cluster and group named, a chart per group, self-contained,
no console errors, a screenshot.

The demo takes most of the time (it plans, approves and applies for real), so it runs once per module.
Without Chromium the browser test skips, saying why; .ci/run installs it in CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reconciler.gitops.records import NOTES_REF, ApplyRecord, GroupRecord, encode_note
from tests.support.terminal import from_a_terminal

pytestmark = pytest.mark.xdist_group("timing")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium; .ci/run does it in CI)"
)
HOSTILE = "<script>alert(1)</script><img src=https://evil.example/x.png>"
CLUSTERS = {"demo": ("demo-general", "demo-gpu"), "staging": ("stg-general", "stg-spot")}
STAGING = """\
version: 1
cluster: staging
nodeGroups:
  stg-general:
    removeInstances: []
    hold: false
    desired: {general}
    minSize: 1
    maxSize: 10
  stg-spot:
    removeInstances: []
    hold: {hold}
    desired: 1
    minSize: 0
    maxSize: 10
"""


@dataclass(frozen=True)
class Demo:
    root: Path
    config: Path
    report: Path
    env: dict[str, str]


def _git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def _run_demo(keep: Path, env: dict[str, str]) -> None:
    """`asg-reconciler demo --keep DIR` until it hands over, then Ctrl-C (how a person stops it)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "demo", "--keep", str(keep)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=from_a_terminal,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("git -C "):  # the last line of the hand-over
                break
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (keep / "capacity.git").is_dir(), process.stderr.read() if process.stderr else ""


def _second_cluster(demo: Path, env: dict[str, str]) -> None:
    """What a person does by hand: clone, add capacity/staging.yaml in two commits with trailers (one
    reason hostile), record an apply on the first, push."""
    clone = demo / "by-hand"
    _git("clone", "--quiet", str(demo / "capacity.git"), str(clone), cwd=demo, env=env)
    _git("fetch", "--quiet", "origin", f"{NOTES_REF}:{NOTES_REF}", cwd=clone, env=env)
    me = {
        **env,
        "GIT_AUTHOR_NAME": "Mallory <b>Ops</b>",
        "GIT_AUTHOR_EMAIL": "ops@example.com",
        "GIT_COMMITTER_NAME": "Ops",
        "GIT_COMMITTER_EMAIL": "ops@example.com",
    }
    (clone / "capacity" / "staging.yaml").write_text(STAGING.format(general=2, hold="false"))
    _git("add", "capacity/staging.yaml", cwd=clone, env=me)
    message = (
        "capacity(staging): scale up stg-general 0 -> 2\n\n"
        "Capacity-Cluster: staging\nCapacity-Change: stg-general 0 -> 2\n"
        "Capacity-Reason: stg-general: 2 pending pods need 2 × m5.large\n"
    )
    _git("commit", "--quiet", "-m", message, cwd=clone, env=me)
    first = _git("rev-parse", "HEAD", cwd=clone, env=me).strip()
    record = ApplyRecord(
        first,
        datetime.now(UTC),
        True,
        (GroupRecord("stg-general", "scale-up", 0, 2, detail="raised desired 0 -> 2"),),
        applier="asg-reconciler-apply",
        cluster="staging",
    )
    _git("notes", "--ref", NOTES_REF, "add", "-m", encode_note([record]), first, cwd=clone, env=me)
    (clone / "capacity" / "staging.yaml").write_text(STAGING.format(general=4, hold="true"))
    message = (
        "capacity(staging): scale up stg-general 2 -> 4\n\n"
        f"Capacity-Cluster: staging\nCapacity-Change: stg-general 2 -> 4\nCapacity-Reason: {HOSTILE}\n"
    )
    _git("commit", "--quiet", "-am", message, cwd=clone, env=me)
    _git("push", "--quiet", "origin", "main", NOTES_REF, cwd=clone, env=me)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    root = tmp_path_factory.mktemp("history-report")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GIT_"))}
    env["XDG_CACHE_HOME"] = str(root / "cache")
    _run_demo(root / "demo", env)
    _second_cluster(root / "demo", env)
    config, report = root / "demo" / "asg-reconciler.yaml", root / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "history", "--config", str(config), "--report", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {report}: 2 clusters, 4 node groups, ")
    return Demo(root, config, report, env)


class _Elements(HTMLParser):
    """Every element with its attributes, and the text, of a page (the report's or the browser's DOM)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _check_page(html: str) -> None:
    page = _Elements(html)
    tags = [tag for tag, _ in page.elements]
    text = " ".join(page.text)
    for cluster, groups in CLUSTERS.items():
        assert f"Cluster {cluster}" in text
        for group in groups:
            charts = [
                a
                for t, a in page.elements
                if t == "svg" and a.get("aria-label", "").startswith(f"{cluster} / {group}:")
            ]
            assert len(charts) == 1, (cluster, group)
    assert tags.count("svg") == 4
    assert "script" not in tags and "img" not in tags and "link" not in tags
    for _, attrs in page.elements:
        for key, value in attrs.items():
            if key in ("src", "href", "xlink:href", "action", "srcset"):
                assert value is None or not value.lower().lstrip().startswith(("http:", "https:", "//")), (
                    key,
                    value,
                )
    assert HOSTILE in text  # shown as text
    assert "Demo Reviewer" in text  # who approved the demo's scale-down


def test_the_report_names_every_cluster_and_group_with_a_chart_each(demo: Demo) -> None:
    html = demo.report.read_text()
    _check_page(html)
    assert HOSTILE not in html  # escaped: in the page as text only


@needs_chromium
def test_chromium_renders_it_from_file_without_errors(demo: Demo) -> None:
    assert CHROMIUM is not None
    url = demo.report.resolve().as_uri()
    common = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ]
    dom = subprocess.run(
        [*common, f"--user-data-dir={demo.root / 'chromium-dom'}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    _check_page(dom.stdout)  # the DOM the browser built: the charts are there, nothing ran or loaded

    shot = demo.root / "report.png"
    screenshot = subprocess.run(
        [
            *common,
            f"--user-data-dir={demo.root / 'chromium-shot'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert screenshot.returncode == 0, screenshot.stderr[-2000:]
    assert [line for line in screenshot.stderr.splitlines() if ":CONSOLE" in line] == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # a page, not a blank
