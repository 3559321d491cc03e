"""scaleDown.windows in apply: one more gate per approved removal, counted per run across groups;
removals it holds back wait, still approved and not refused (exit 0 when nothing else is), and
scale-ups are never gated (reconciler/apply/window_gate.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from reconciler.apply.changes import Introduced
from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.outcome import NONE, SCALE_DOWN, SCALE_UP, ApplyReport
from reconciler.apply.sync import apply
from reconciler.domain.windows import Window
from reconciler.gitops.manifest import GroupEntry, Manifest, Removal
from tests.support.plan_world import NOW, World, make_config

H = timedelta(hours=1)
# NOW is Monday 1 June 2026, 12:00 UTC
OPEN = Window("0 9 * * 1-5", 8 * H, 2)  # 09:00-17:00 on weekdays, two removals per run
CLOSED = Window("0 20 * * *", 2 * H, 2)  # 20:00-22:00
APPROVED = ("i-n3", "i-n4", "i-n5")


@dataclass
class Outcome:
    complete: bool = True
    reason: str = ""


@dataclass
class Cloud:
    """Actuator, drainer and gate at once: records what apply did."""

    terminated: list[str] = field(default_factory=list)
    raised: list[tuple[str, int]] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)

    def raise_desired(self, name: str, expected: int, desired: int) -> object:
        self.raised.append((name, desired))
        return None

    def terminate(self, name: str, instance_id: str) -> object:
        self.terminated.append(instance_id)
        return None

    def mark(self, node: str, commit: str, *, instance: str | None = None) -> None:
        return None

    def drain(
        self,
        node: str,
        *,
        vet: Callable[[Sequence[Mapping[str, Any]]], str | None] | None = None,
        check: Callable[[], None] | None = None,
        instance: str | None = None,
    ) -> Outcome:
        self.drained.append(node)
        return Outcome()

    def unmark(self, node: str) -> None:
        return None

    def marked(self) -> dict[str, str]:
        return {}

    def remaining(self, node: str) -> list[dict[str, Any]]:
        return []

    def instance_of(self, node: str) -> str | None:
        return f"i-{node}"

    def approves(self, commit: str) -> tuple[bool, str]:
        return True, ""


def world(groups: Sequence[str] = ("general",)) -> World:
    """Each group: five idle nodes n1..n5 (prefixed by the group after the first), min size 1."""
    w = World()
    for index, name in enumerate(groups):
        w.group(name, min_size=1)
        for n in range(1, 6):
            w.node(name, f"{name[0] if index else ''}n{n}")
    return w


def run(
    windows: Sequence[Window],
    *,
    now: datetime = NOW,
    clock: Callable[[], datetime] | None = None,
    dry_run: bool = False,
    groups: Mapping[str, tuple[int, tuple[str, ...]]] | None = None,
    parallel: int = 1,
) -> tuple[ApplyReport, Cloud]:
    """Apply a manifest listing `groups` (name -> desired, approved removals) on `world`."""
    groups = groups or {"general": (5, APPROVED)}
    w = world(tuple(groups))
    inventory = w.inventory()
    config = make_config(scale_down={"windows": tuple(windows)})
    config = replace(config, apply=replace(config.apply, max_parallel_drains=parallel))
    manifest = Manifest(
        "test",
        tuple(
            GroupEntry(name, desired, remove_instances=tuple(Removal(i) for i in ids))
            for name, (desired, ids) in groups.items()
        ),
    )
    introduced = {(name, i): Introduced(name, i, "a" * 40) for name, (_, ids) in groups.items() for i in ids}
    inputs = ApplyInputs(
        config=config,
        inventory=inventory,
        manifest=manifest,
        commit="b" * 40,
        introduced=introduced,
        commit_time=lambda sha: now - H,
        now=now,
        dry_run=dry_run,
    )
    cloud = Cloud()
    effects = Effects(cloud, cloud, cloud, observe=lambda: inventory, clock=clock or (lambda: now))
    return apply(inputs, effects), cloud


def notes(report: ApplyReport) -> list[str]:
    return [n for g in report.groups for n in g.notes]


def test_without_windows_every_approved_removal_goes() -> None:
    report, cloud = run([])
    assert cloud.terminated == list(APPROVED)
    assert report.exit_code == 0


def test_outside_every_window_removals_wait_naming_the_next_opening() -> None:
    report, cloud = run([CLOSED])
    assert cloud.terminated == [] and cloud.drained == []
    (group,) = report.groups
    assert group.action == NONE and report.exit_code == 0 and group.waiting == APPROVED
    assert notes(report) == [
        f"{i}: waits for the scale-down window: opens 2026-06-01 20:00 UTC (in 8h); stays approved"
        for i in APPROVED
    ]


def test_inside_a_window_at_most_max_nodes_per_run_in_the_order_judged() -> None:
    report, cloud = run([OPEN])
    assert cloud.terminated == ["i-n3", "i-n4"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.desired_after == 3 and report.exit_code == 0
    assert group.waiting == ("i-n5",)
    assert (
        "i-n5: waits for a later run: the scale-down window allows 2 removal(s) per apply run "
        "(scaleDown.windows maxNodes) and this run has started them; stays approved"
    ) in group.notes


def test_a_window_without_max_nodes_lets_every_removal_through() -> None:
    report, cloud = run([Window("0 9 * * 1-5", 8 * H)])
    assert cloud.terminated == list(APPROVED) and report.exit_code == 0


def test_the_count_is_per_run_across_groups() -> None:
    groups = {"general": (5, ("i-n4", "i-n5")), "spot": (5, ("i-sn4", "i-sn5"))}
    report, cloud = run([Window("0 9 * * 1-5", 8 * H, 3)], groups=groups)
    assert cloud.terminated == ["i-n4", "i-n5", "i-sn4"]
    spot = next(g for g in report.groups if g.name == "spot")
    assert spot.terminated == ("i-sn4",)
    assert spot.waiting == ("i-sn5",)
    assert any(
        n.startswith("i-sn5: waits for a later run: the scale-down window allows 3") for n in spot.notes
    )


def test_a_blackout_inside_an_open_window_holds_removals_back() -> None:
    lunch = Window("0 11 * * *", 2 * H, 0)
    report, cloud = run([OPEN, lunch])
    assert cloud.terminated == [] and report.exit_code == 0
    assert notes(report)[0].startswith("i-n3: waits for the scale-down window: opens 2026-06-01 13:00 UTC")


def test_a_dry_run_says_the_same() -> None:
    report, cloud = run([OPEN], dry_run=True)
    assert cloud.terminated == []
    said = notes(report)
    assert said[:2] == ["would drain n3 and terminate i-n3", "would drain n4 and terminate i-n4"]
    assert "i-n5: waits for a later run: the scale-down window allows 2 removal(s)" in said[2]
    assert report.exit_code == 0
    closed, _ = run([CLOSED], dry_run=True)
    assert all(": waits for the scale-down window: opens " in n for n in notes(closed))
    assert closed.exit_code == 0


def test_scale_ups_are_never_gated() -> None:
    report, cloud = run([CLOSED], groups={"general": (7, ())})
    assert cloud.raised == [("general", 7)]
    assert report.groups[0].action == SCALE_UP and report.exit_code == 0


def test_a_batch_that_would_start_after_the_windows_closed_waits() -> None:
    """The count is taken when the run starts; a later batch also needs a window still open."""
    times = [NOW, NOW + 5 * H + timedelta(minutes=1)]  # the second batch starts after 17:00

    def clock() -> datetime:
        return times.pop(0) if len(times) > 1 else times[0]

    report, cloud = run([Window("0 9 * * 1-5", 8 * H, 5)], clock=clock)
    assert cloud.terminated == ["i-n3"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.terminated == ("i-n3",) and report.exit_code == 0
    assert notes(report)[-2:] == [
        f"{i}: waits for the scale-down window (it closed while this run worked): opens "
        "2026-06-02 09:00 UTC (in 16h); stays approved"
        for i in ("i-n4", "i-n5")
    ]


def test_a_run_inside_the_window_with_one_batch_is_a_scale_down() -> None:
    report, cloud = run([OPEN], groups={"general": (5, ("i-n5",))}, parallel=2)
    assert cloud.terminated == ["i-n5"]
    assert report.groups[0].action == SCALE_DOWN and report.exit_code == 0
