"""Synthetic traces: one seed, one trace; each kind has the shape docs/traces.md promises; and
whatever the generator writes, the reader accepts."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.model import Resources
from reconciler.simulation.generate import Batch, Diurnal, RawTrace, default_groups, generate
from reconciler.simulation.trace import Arrival, read_trace


def alive_every_five_minutes(trace: RawTrace, hours: int) -> list[tuple[float, int]]:
    """(time, pods present once every event up to that time happened), for traces without runFor."""
    samples: list[tuple[float, int]] = []
    alive, events = 0, list(trace.events)
    for at in range(0, hours * 3600, 300):
        while events and events[0]["at"] <= at:
            alive += 1 if events.pop(0)["kind"] == "arrive" else -1
        samples.append((at, alive))
    return samples


@pytest.mark.parametrize("kind", ["diurnal", "batch", "steady", "mixed"])
def test_same_seed_same_trace_other_seed_other_trace_and_the_reader_accepts_it(
    kind: str, tmp_path: Path
) -> None:
    first = generate(kind, 48, seed=7)
    assert first.lines() == generate(kind, 48, seed=7).lines()
    if kind != "steady":  # a constant base has nothing random in it
        assert first.lines() != generate(kind, 48, seed=8).lines()
    first.write(tmp_path / "t.jsonl")
    trace = read_trace(tmp_path / "t.jsonl")
    assert trace.start == datetime(2026, 6, 1, tzinfo=UTC)
    assert [g.name for g in trace.groups] == ["general", "batch"]
    assert len(trace.events) == len(first.events) > 0
    assert trace.end_at < 48 * 3600


def test_diurnal_peaks_at_the_peak_hour_and_bottoms_out_twelve_hours_away() -> None:
    shape = Diurnal(min_replicas=4, max_replicas=40, peak_hour=13)
    trace = generate("diurnal", 48, seed=1, diurnal=shape)
    counts = alive_every_five_minutes(trace, 48)
    by_hour: dict[int, list[int]] = {}
    for at, n in counts:  # the count may jitter: average each hour of the day over both days
        by_hour.setdefault(int(at % 86400 // 3600), []).append(n)
    mean = {hour: sum(ns) / len(ns) for hour, ns in by_hour.items()}
    assert max(mean, key=mean.__getitem__) in (12, 13, 14)
    assert min(mean, key=mean.__getitem__) in (0, 1, 2)
    assert mean[13] >= 38 and mean[1] <= 4.5 and 19 <= mean[7] <= 25
    assert all(4 <= n <= 40 for _, n in counts)
    assert shape.replicas(13 * 3600) == 40 and shape.replicas(1 * 3600) == 4
    assert shape.replicas(7 * 3600) == pytest.approx(22)
    arrivals = [e for e in trace.events if e["kind"] == "arrive"]
    requests = arrivals[0]["pod"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "500m", "memory": "1Gi"}
    assert all("runFor" not in e for e in arrivals)


def test_diurnal_departures_name_pods_that_are_there() -> None:
    trace = generate("diurnal", 24, seed=3)
    present: set[str] = set()
    for event in trace.events:
        if event["kind"] == "arrive":
            name = event["pod"]["metadata"]["name"]
            assert name not in present
            present.add(name)
        else:
            present.remove(event["pod"])


def test_a_batch_burst_is_n_pods_at_one_time_with_run_for_on_the_batch_group(tmp_path: Path) -> None:
    trace = generate("batch", 72, seed=5, batch=Batch(hour=2, pods=20, run_for=2700, jitter=0.2))
    assert {e["kind"] for e in trace.events} == {"arrive"}
    bursts = Counter(e["at"] for e in trace.events)
    assert bursts == {2 * 3600: 20, 26 * 3600: 20, 50 * 3600: 20}
    for event in trace.events:
        assert 2700 * 0.8 <= event["runFor"] <= 2700 * 1.2
    trace.write(tmp_path / "t.jsonl")
    first = read_trace(tmp_path / "t.jsonl").events[0]
    assert isinstance(first, Arrival)
    assert first.pod.requests == Resources.of(cpu=1000, memory=2 * 2**30)
    assert first.pod.namespace == "batch" and first.pod.owner is not None and first.pod.owner.kind == "Job"
    batch_group = next(g for g in default_groups() if g["name"] == "batch")
    assert dict(first.pod.scheduling.node_selector).items() <= batch_group["labels"].items()
    assert [(t.key, t.value, t.effect) for t in first.pod.scheduling.tolerations] == [
        ("dedicated", "batch", "NoSchedule")
    ]


def test_a_batch_hour_already_past_at_the_start_waits_for_the_next_day() -> None:
    late_start = datetime(2026, 6, 1, 6, tzinfo=UTC)
    trace = generate("batch", 24, seed=1, start=late_start, batch=Batch(hour=2, pods=3))
    assert {e["at"] for e in trace.events} == {20 * 3600}  # 02:00 of the next day


def test_steady_is_a_constant_base_and_mixed_is_all_three() -> None:
    steady = generate("steady", 24, seed=1)
    assert [e["at"] for e in steady.events] == [0.0] * 6
    mixed = generate("mixed", 24, seed=1)
    names = {e["pod"]["metadata"]["labels"]["app"] for e in mixed.events if e["kind"] == "arrive"}
    assert names == {"base", "web", "nightly"}
    assert [e["at"] for e in mixed.events] == sorted(e["at"] for e in mixed.events)


def test_groups_can_be_replaced() -> None:
    groups: list[dict[str, Any]] = [
        {
            "name": "only",
            "instanceType": "c5.xlarge",
            "minSize": 0,
            "maxSize": 5,
            "desired": 1,
            "zones": ["eu-west-1a"],
        }
    ]
    assert generate("steady", 1, seed=1, groups=groups).groups == tuple(groups)


@pytest.mark.parametrize(
    ("kind", "hours", "message"),
    [
        ("weekly", 24, "trace kind 'weekly' is not one of diurnal, batch, steady, mixed"),
        ("steady", 0, "hours: 0 is not a positive number of hours (e.g. 24)"),
        ("steady", float("nan"), "hours: nan is not a positive number of hours"),
    ],
)
def test_bad_arguments_are_user_errors(kind: str, hours: float, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        generate(kind, hours, seed=1)


def test_the_documented_day_curve_is_the_generator_s() -> None:
    text = (Path(__file__).parents[2] / "docs" / "traces.md").read_text()
    hours_line, replicas_line = (
        line for line in text.splitlines() if line.startswith(("hour ", "replicas "))
    )
    hours = [int(h) for h in hours_line.split()[1:]]
    documented = [int(n) for n in replicas_line.split()[1:]]
    assert documented == [round(Diurnal().replicas(h * 3600)) for h in hours]
