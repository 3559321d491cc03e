"""Synthetic workload traces (`simulate trace generate`), for trying policies before any real trace
exists; docs/traces.md draws each kind's shape.

Every kind is a pure function of its seed (one `random.Random(seed)`), so a simulation result can be
reproduced from a command line. Times of day are the start's UTC clock; the default start is a
midnight, so hour h of the trace is h o'clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.domain.errors import UserError
from reconciler.simulation.trace import RawTrace, max_seconds

KINDS = ("diurnal", "batch", "steady", "mixed")
DEFAULT_START = datetime(2026, 6, 1, tzinfo=UTC)
DAY = 86400.0
HOUR = 3600.0


def default_groups() -> list[dict[str, Any]]:
    """A general-purpose group for the services, and a tainted group that scales from zero for the
    batch jobs (their pods select and tolerate it)."""
    return [
        {
            "name": "general",
            "instanceType": "m5.large",
            "minSize": 1,
            "maxSize": 50,
            "desired": 3,
            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
        },
        {
            "name": "batch",
            "instanceType": "m5.2xlarge",
            "minSize": 0,
            "maxSize": 20,
            "desired": 0,
            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
            "labels": {"workload": "batch"},
            "taints": ["dedicated=batch:NoSchedule"],
        },
    ]


@dataclass(frozen=True)
class Diurnal:
    """A web Deployment whose replicas follow a day: `min_replicas` at `peak_hour - 12`, rising on
    a cosine to `max_replicas` at `peak_hour`, re-evaluated every `step_seconds` with +-`jitter`
    noise (the autoscaler of a real service is not smooth either)."""

    min_replicas: int = 4
    max_replicas: int = 40
    peak_hour: float = 13.0
    step_seconds: float = 300.0
    jitter: float = 0.05
    cpu: str = "500m"
    memory: str = "1Gi"
    name: str = "web"
    namespace: str = "default"

    def replicas(self, at: float) -> float:
        """The noiseless curve at `at` seconds after a midnight start."""
        hours_from_peak = (at / HOUR - self.peak_hour) % 24
        rise = (1 + math.cos(2 * math.pi * hours_from_peak / 24)) / 2  # 1 at the peak, 0 twelve hours off
        return self.min_replicas + (self.max_replicas - self.min_replicas) * rise


@dataclass(frozen=True)
class Batch:
    """A nightly Job: every day at `hour`, `pods` pods arrive at the same second, each running for
    `run_for` seconds +-`jitter` once started, on the batch group (`node_selector`, `tolerations`)."""

    hour: float = 2.0
    pods: int = 20
    run_for: float = 2700.0
    jitter: float = 0.2
    cpu: str = "1"
    memory: str = "2Gi"
    name: str = "nightly"
    namespace: str = "batch"
    node_selector: Mapping[str, str] = field(default_factory=lambda: {"workload": "batch"})
    tolerations: tuple[Mapping[str, str], ...] = (
        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
    )


@dataclass(frozen=True)
class Steady:
    """A constant base (a StatefulSet's replicas): all arrive at the start and stay."""

    replicas: int = 6
    cpu: str = "250m"
    memory: str = "512Mi"
    name: str = "base"
    namespace: str = "default"


def generate(
    kind: str,
    hours: float,
    seed: int,
    *,
    start: datetime = DEFAULT_START,
    groups: Sequence[Mapping[str, Any]] | None = None,
    diurnal: Diurnal = Diurnal(),
    batch: Batch = Batch(),
    steady: Steady = Steady(),
    hours_field: str = "hours",
) -> RawTrace:
    """A trace of `kind` (diurnal, batch, steady or mixed: all three) lasting `hours`, the same for
    the same arguments and seed. `hours_field`: what errors call `hours` (the CLI's `--hours`)."""
    if kind not in KINDS:
        raise UserError(f"trace kind {kind!r} is not one of {', '.join(KINDS)}")
    if not (isinstance(hours, int | float) and math.isfinite(hours) and hours > 0):
        raise UserError(f"{hours_field}: {hours} is not a positive number of hours (e.g. 24)")
    if hours * HOUR > max_seconds():
        raise UserError(
            f"{hours_field}: {hours:g} is out of range "
            f"(at most {max_seconds() / HOUR:g}: 31 days, a trace's bound)"
        )
    rng = random.Random(seed)
    end = hours * HOUR
    events: list[dict[str, Any]] = []
    if kind in ("steady", "mixed"):
        events += _steady(steady)
    if kind in ("diurnal", "mixed"):
        events += _diurnal(diurnal, end, rng)
    if kind in ("batch", "mixed"):
        events += _batch(batch, start, end, rng)
    return RawTrace(
        start, tuple(default_groups() if groups is None else groups), tuple(sorted(events, key=_at))
    )


def _at(event: Mapping[str, Any]) -> float:
    return float(event["at"])


def pod_object(
    name: str,
    namespace: str,
    cpu: str,
    memory: str,
    labels: Mapping[str, str],
    owner: tuple[str, str],
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod as kubectl prints it, reduced to what scheduling reads."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}],
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **(spec or {}),
        },
    }


def _arrive(at: float, pod: dict[str, Any], run_for: float | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "arrive", "at": round(at, 3), "pod": pod}
    if run_for is not None:
        event["runFor"] = round(run_for, 3)
    return event


def _steady(shape: Steady) -> list[dict[str, Any]]:
    labels = {"app": shape.name}
    return [
        _arrive(
            0.0,
            pod_object(
                f"{shape.name}-{i}",
                shape.namespace,
                shape.cpu,
                shape.memory,
                labels,
                ("StatefulSet", shape.name),
            ),
        )
        for i in range(shape.replicas)
    ]


def _diurnal(shape: Diurnal, end: float, rng: random.Random) -> list[dict[str, Any]]:
    """Steps the replica count along the curve; scale-ups add new pods, scale-downs remove the
    newest first (what a ReplicaSet does with equally ranked pods)."""
    if not 0 <= shape.min_replicas <= shape.max_replicas:
        raise UserError(f"diurnal: replicas {shape.min_replicas}..{shape.max_replicas} (use 0 <= min <= max)")
    if shape.step_seconds <= 0:
        raise UserError(f"diurnal: step {shape.step_seconds}s (use a positive number of seconds)")
    template_hash = f"{rng.getrandbits(32):08x}"
    replica_set = f"{shape.name}-{template_hash}"
    labels = {"app": shape.name, "pod-template-hash": template_hash}
    events: list[dict[str, Any]] = []
    running: list[str] = []
    serial = 0
    at = 0.0
    while at < end:
        noisy = shape.replicas(at) * (1 + rng.uniform(-shape.jitter, shape.jitter))
        target = min(shape.max_replicas, max(shape.min_replicas, round(noisy)))
        while len(running) < target:
            serial += 1
            name = f"{replica_set}-{serial:05d}"
            running.append(name)
            pod = pod_object(
                name, shape.namespace, shape.cpu, shape.memory, labels, ("ReplicaSet", replica_set)
            )
            events.append(_arrive(at, pod))
        while len(running) > target:
            events.append(
                {"kind": "depart", "at": round(at, 3), "namespace": shape.namespace, "pod": running.pop()}
            )
        at += shape.step_seconds
    return events


def _batch(shape: Batch, start: datetime, end: float, rng: random.Random) -> list[dict[str, Any]]:
    """One burst a day at `hour` o'clock of the start's UTC clock, within the trace."""
    if shape.pods < 1 or shape.run_for < 1:
        raise UserError(f"batch: {shape.pods} pods for {shape.run_for}s (use at least 1 pod and 1 second)")
    midnight = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = (midnight - start.astimezone(UTC)).total_seconds() + shape.hour * HOUR
    spec = {
        "nodeSelector": dict(shape.node_selector),
        "tolerations": [dict(t) for t in shape.tolerations],
        "restartPolicy": "Never",
    }
    events: list[dict[str, Any]] = []
    day = 0
    while True:
        at = first + day * DAY
        day += 1
        if at >= end:
            return events
        if at < 0:
            continue
        job = f"{shape.name}-{(start + timedelta(seconds=at)).strftime('%Y%m%d')}"
        labels = {"app": shape.name, "job-name": job}
        for index in range(shape.pods):
            run_for = shape.run_for * (1 + rng.uniform(-shape.jitter, shape.jitter))
            pod = pod_object(
                f"{job}-{index:03d}", shape.namespace, shape.cpu, shape.memory, labels, ("Job", job), spec
            )
            events.append(_arrive(at, pod, max(1.0, run_for)))
