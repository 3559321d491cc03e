"""A cluster, a cloud and a clock for the scale-down window gate's tests: apply's effects recorded, no AWS."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from reconciler.apply.changes import Introduced
from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.outcome import ApplyReport
from reconciler.apply.sync import apply
from reconciler.domain.windows import Window
from reconciler.gitops.manifest import GroupEntry, Manifest, Removal
from tests.support.plan_world import NOW, World, make_config

H = timedelta(hours=1)

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
