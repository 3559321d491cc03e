"""A simulated idle day of the split deployment (issue 20, item 4): what `run` writes to Git, and
how often it lists Pods, while nothing happens. Run by benchmarks/steady_state.py.

The real deployment: a plan-stage and an apply-stage `asg-reconciler run` process (latency.py's
harness: the fake Kubernetes API served over HTTP, moto's server, a local bare capacity repo), one
ASG of two full nodes (78% of their CPU requested), scale-down on.

Time is shrunk: every cadence of `run` is its default times INTERVAL / 30 s (`run.interval` 30s ->
INTERVAL; `run.resyncInterval` 10m, `aws.refreshInterval` 1m, `scaleDown.unneededTime` and
`scaleDown.delayAfterScaleUp` 10m likewise). `run.applyPollInterval` (5s) is set to INTERVAL rather
than shrunk: an ls-remote is a read, and a poll every few milliseconds would only burn CPU. Leader
election keeps its defaults (a Lease is no Git write, and shrunk timings would make leaders flap).

A day at the defaults is 86400 / 30 = 2,880 cycles of each stage: a count over N real cycles is
scaled by 2,880 / N (by the plan stage's cycles for main, the state and proposal branches; by
apply's for the notes; by the fewer of the two for ref updates and bytes). Pod LISTs come from a
wall-clock timer (the resync), so their count per resync period is scaled to the 144 resyncs of a
day at 10m.

1. quiet: once both stages have settled (the first plan committed the manifest, the first apply
   wrote its record), QUIET_CYCLES cycles of each stage with nothing to do;
2. control, so the meter is known to see writes: one unschedulable pod; its scale-up must show as a
   commit on main and a record on the notes; the new node registers and the scheduler places the
   pod there (as in latency.py);
3. waiting: the control pod is deleted, its node becomes unneeded, the plan proposes removing it
   (the proposal branch appears); then WAITING_CYCLES cycles (and at least a minute, for the
   Events) with the proposal open and nobody reviewing it, the common steady state of a cluster
   that scales down through reviews.

Counted on the bare repository as a Git host sees it, between readings: new commits on main, on
`asg-reconciler/bench/state`, on `refs/notes/asg-reconciler` and on every other branch (proposals),
ref updates (created, moved or deleted), and the objects new to the repository with their size on
disk (zlib-compressed, loose or packed: about what a push carried). Goal: in both idle windows, no
Git write at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from latency import Process, World, _kept, wait

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.demo.mock_aws import mock_aws

DAY, DEFAULT_INTERVAL, DEFAULT_RESYNC = 86_400.0, 30.0, 600.0
CYCLES_PER_DAY = DAY / DEFAULT_INTERVAL  # 2,880 of each stage
INTERVAL, QUIET_CYCLES, WAITING_CYCLES = 0.1, 150, 100
SETTLE_CYCLES = 3  # cycles of each stage after a write, before a window starts
EVENT_FOLD = 60.0  # the Event recorder writes a standing Event once a minute (a clock, not shrunk):
# the waiting window lasts longer than that, so the proposal's Event is seen rewritten
STAGES = ("plan", "apply")
MAIN, NOTES = "refs/heads/main", "refs/notes/asg-reconciler"
STATE, PROPOSAL = "refs/heads/asg-reconciler/bench/state", "refs/heads/asg-reconciler/bench/scale-down"
_POD_LIST = re.compile(r"^/api/v1/(namespaces/[^/]+/)?pods$")
_LOGGED = re.compile(rb"^\S+ (?:INFO|WARNING|ERROR|CRITICAL) ", re.MULTILINE)


@dataclass(frozen=True)
class Repo:
    """The bare repository as a Git host sees it at one moment."""

    refs: dict[str, str]
    objects: dict[str, int]  # every object stored, loose or packed: its size on disk (compressed)

    @staticmethod
    def read(remote: Path) -> Repo:
        listed = _git(remote, "for-each-ref", "--format=%(objectname) %(refname)")
        refs = {ref: sha for sha, ref in (line.split(" ", 1) for line in listed.splitlines())}
        stored = _git(
            remote, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)"
        )
        return Repo(refs, {sha: int(size) for sha, size in (line.split() for line in stored.splitlines())})


@dataclass(frozen=True)
class Writes:
    """What reached the bare repository between two readings."""

    commits: dict[str, int]  # main, state, notes, proposals: new commits on each
    ref_updates: int
    objects: int
    bytes: int

    @property
    def any(self) -> bool:
        return bool(sum(self.commits.values()) or self.ref_updates or self.objects or self.bytes)


def _git(remote: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=remote, capture_output=True, text=True, check=True).stdout


def _new_commits(remote: Path, before: str | None, after: str | None) -> int:
    if after is None or after == before:
        return 0
    return int(_git(remote, "rev-list", "--count", after, *([f"^{before}"] if before else []), "--").strip())


def writes(remote: Path, before: Repo, after: Repo) -> Writes:
    refs = set(before.refs) | set(after.refs)
    commits = {
        name: _new_commits(remote, before.refs.get(ref), after.refs.get(ref))
        for name, ref in (("main", MAIN), ("state", STATE), ("notes", NOTES))
    }
    others = refs - {MAIN, STATE, NOTES}
    commits["proposals"] = sum(_new_commits(remote, before.refs.get(r), after.refs.get(r)) for r in others)
    moved = sum(before.refs.get(r) != after.refs.get(r) for r in refs)
    new = set(after.objects) - set(before.objects)
    return Writes(commits, moved, len(new), sum(after.objects[sha] for sha in new))


def pod_lists(kube: FakeKubeAPI) -> int:
    """Pod LISTs served so far (first pages: a paged list counts once), by either stage."""
    return sum(
        1
        for r in list(kube.requests)
        if r.method == "GET"
        and _POD_LIST.match(r.path)
        and r.query.get("watch") not in ("true", "1")
        and not r.query.get("continue")
    )


def api_writes(kube: FakeKubeAPI) -> Counter[str]:
    """Writes served so far (every method but GET), by resource (configmaps, events), a Lease by its
    name (the stages' leader Leases are renewed by the clock, apply's own is taken every cycle)."""
    counted: Counter[str] = Counter()
    for r in list(kube.requests):
        if r.method != "GET":
            parts = r.path.strip("/").split("/")
            at = parts.index("namespaces") + 2 if "namespaces" in parts else len(parts) - 1
            resource = parts[min(at, len(parts) - 1)]
            counted[f"lease {parts[-1]}" if resource == "leases" else resource] += 1
    return counted


@dataclass(frozen=True)
class Reading:
    """Everything counted, at one moment."""

    repo: Repo
    cycles: dict[str, float]  # plan, apply: asg_reconciler_cycles_total of each process
    pod_lists: int
    relists: float  # the plan stage's cache: Pod lists after its first (resyncs, 410s, errors)
    api_writes: Counter[str]
    log_lines: dict[str, int]  # plan, apply: lines at INFO and above in each process's log
    at: float


@dataclass(frozen=True)
class Window:
    """Two readings around a stretch of idle cycles."""

    name: str
    first: Reading
    last: Reading
    writes: Writes

    def ran(self, stage: str) -> float:
        return self.last.cycles[stage] - self.first.cycles[stage]

    @property
    def seconds(self) -> float:
        return self.last.at - self.first.at


def _duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def _settle(done: Callable[[str], float]) -> None:
    settled = {stage: done(stage) + SETTLE_CYCLES for stage in STAGES}
    wait(lambda: all(done(s) >= n for s, n in settled.items()), 120, "settled cycles")


def idle_day(quiet: int = QUIET_CYCLES, waiting: int = WAITING_CYCLES, interval: float = INTERVAL) -> bool:
    """Print the idle day's figures; True when the goal is met (and the control's writes were seen)."""
    scale = interval / DEFAULT_INTERVAL
    shrunk = {name: _duration(seconds * scale) for name, seconds in (("10m", 600.0), ("1m", 60.0))}
    more = {
        "run": {"applyPollInterval": _duration(interval), "resyncInterval": shrunk["10m"]},
        "aws": {"refreshInterval": shrunk["1m"]},
        "scaleDown": {"enabled": "true", "unneededTime": shrunk["10m"], "delayAfterScaleUp": shrunk["10m"]},
    }
    keep = os.environ.get("BENCH_KEEP")  # a directory: keep the logs there
    with (
        tempfile.TemporaryDirectory() if not keep else _kept(keep) as kept,
        mock_aws(),
        FakeKubeAPI() as kube,
    ):
        tmp = Path(kept)
        world = World(tmp, kube)
        remote = tmp / "capacity.git"
        stages = {stage: Process(world, stage, _duration(interval), stage, more) for stage in STAGES}

        def done(stage: str) -> float:
            return stages[stage].metric("asg_reconciler_cycles_total", stage=stage)

        def read() -> Reading:
            relists = sum(
                stages["plan"].metric("asg_reconciler_cache_relists_total", kind="Pod", reason=reason)
                for reason in ("resync", "expired", "error")
            )
            cycles = {stage: done(stage) for stage in STAGES}
            logged = {stage: len(_LOGGED.findall((tmp / f"{stage}.log").read_bytes())) for stage in STAGES}
            return Reading(
                Repo.read(remote),
                cycles,
                pod_lists(kube),
                relists,
                api_writes(kube),
                logged,
                time.monotonic(),
            )

        def window(name: str, cycles: int, at_least: float = 0.0) -> Window:
            """`cycles` of each stage, and `at_least` seconds."""
            first = read()
            wait(
                lambda: all(done(s) >= first.cycles[s] + cycles for s in STAGES),
                20 * cycles,
                f"{cycles} cycles",
            )
            time.sleep(max(0.0, first.at + at_least - time.monotonic()))
            last = read()
            return Window(name, first, last, writes(remote, first.repo, last.repo))

        try:
            wait(lambda: all(p.get("/readyz")[0] == 200 for p in stages.values()), 60, "readiness")
            wait(lambda: NOTES in Repo.read(remote).refs, 60, "apply's first record")
            _settle(done)
            quiet_window = window("quiet", quiet)

            desired, known = world.desired(), set(world.instances())
            kube.put(world.pod("control"))
            wait(lambda: world.desired() > desired, 30, "the control's scale-up")
            node = world.register(next(iter(set(world.instances()) - known)))
            kube.put(world.pod("control", node))  # the scheduler places it on its new node
            _settle(done)
            control = writes(remote, quiet_window.last.repo, Repo.read(remote))

            kube.delete_object("Pod", "shop", "control")  # its node is now empty: unneeded
            wait(lambda: PROPOSAL in Repo.read(remote).refs, 60, "the scale-down proposal")
            _settle(done)
            waiting_window = window("waiting", waiting, at_least=EVENT_FOLD + 1)
        finally:
            for process in stages.values():
                process.stop()
    return report([quiet_window, waiting_window], control, interval)


def report(windows: list[Window], control: Writes, interval: float) -> bool:
    """Print the figures per day at the defaults; True when no window wrote to Git and the control's
    writes were seen."""
    scale = interval / DEFAULT_INTERVAL
    print(
        f"idle day: the split deployment with every cadence shrunk {1 / scale:.0f}x (run.interval "
        f"{_duration(interval)}, resyncInterval {DEFAULT_RESYNC * scale:g}s); a day at the defaults is "
        f"{CYCLES_PER_DAY:,.0f} cycles of each stage"
    )
    for w in windows:
        ran = {stage: w.ran(stage) for stage in STAGES}
        days = min(ran.values()) / CYCLES_PER_DAY

        def daily(count: float, stage: str | None = None, ran: dict[str, float] = ran) -> str:
            """A count over the window's cycles (of `stage`, else the fewer) as a count per day."""
            return f"{count * CYCLES_PER_DAY / (ran[stage] if stage else min(ran.values())):,.0f}"

        label = "nothing to do" if w.name == "quiet" else "a scale-down proposal open, nobody reviewing"
        git = w.writes
        print(
            f"  {w.name} ({label}): {ran['plan']:.0f} plan + {ran['apply']:.0f} apply cycles in "
            f"{w.seconds:.0f}s = {days:.3f} day"
        )
        print(
            f"    Git per day: {daily(git.commits['main'], 'plan')} commits on main, "
            f"{daily(git.commits['state'], 'plan')} on the state branch, "
            f"{daily(git.commits['notes'], 'apply')} on the notes, "
            f"{daily(git.commits['proposals'], 'plan')} on proposal branches; "
            f"{daily(git.ref_updates)} ref updates, {daily(git.bytes)} bytes pushed (counted: "
            f"{git.ref_updates} ref updates, {git.objects} objects, {git.bytes} bytes)"
        )
        lists = w.last.pod_lists - w.first.pod_lists
        relists = w.last.relists - w.first.relists
        periods = w.seconds / (DEFAULT_RESYNC * scale)
        print(
            f"    Pod LISTs: {lists} in {periods:.1f} resync periods ({relists:.0f} of them the cache's "
            f"resyncs, {lists - relists:.0f} besides) = {lists / periods * DAY / DEFAULT_RESYNC:.0f} per day "
            "at resyncInterval 10m"
        )
        api = w.last.api_writes - w.first.api_writes
        leader = sum(n for kind, n in api.items() if kind.startswith("lease ") and "-leader-" in kind)
        lock = sum(n for kind, n in api.items() if kind.startswith("lease ") and "-leader-" not in kind)
        others = {
            k: n for k, n in api.items() if not k.startswith("lease ") and k not in ("configmaps", "events")
        }
        print(
            f"    Kubernetes writes per day: {leader * DAY / w.seconds:,.0f} leader Lease renewals (each "
            f"stage's every run.retryPeriod, 2s, not shrunk), {daily(lock, 'apply')} of apply's own Lease "
            f"(taken and given back every cycle, DESIGN rule 6), {daily(api['configmaps'])} status "
            "ConfigMap, "
            f"{api['events'] * DAY / w.seconds:,.0f} Events (one per Event a minute at most: not shrunk)"
            + "".join(f", {n} {kind} (counted)" for kind, n in sorted(others.items()))
        )
        logged = {stage: w.last.log_lines[stage] - w.first.log_lines[stage] for stage in STAGES}
        print(
            f"    log lines (INFO and above) per day: plan {daily(logged['plan'], 'plan')}, "
            f"apply {daily(logged['apply'], 'apply')}"
        )
    print(
        f"  control, one pending pod: {control.commits['main']} commit on main, {control.commits['notes']} "
        f"on the notes, {control.ref_updates} ref updates, {control.bytes} bytes pushed"
    )
    seen = control.commits["main"] >= 1 and control.commits["notes"] >= 1 and control.bytes > 0
    wrote = [w.name for w in windows if w.writes.any]
    print(
        "  goal: no Git write while nothing happens: "
        + (f"MISSED ({', '.join(wrote)})" if wrote else "met")
        + ("" if seen else "; the control's writes were NOT seen: the meter is broken")
    )
    return not wrote and seen
