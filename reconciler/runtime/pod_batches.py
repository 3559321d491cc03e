"""When new pending pods trigger the plan stage: in batches, as Karpenter's provisioner does.

Karpenter (pkg/controllers/provisioning/batcher.go) opens a batch at the first new pod and plans it
once no new pod came for BATCH_IDLE_DURATION (1s) or once it has been open BATCH_MAX_DURATION (10s):
a lone pod waits the idle period, a stream waits at most the maximum. Here `run.debounce` is the
idle period and `run.batchMaxDuration` the maximum. Karpenter plans a stream slower than its idle
period (a pod every 1.5 s) pod by pod; every plan cycle here plans every pod, so a pod-triggered
cycle also starts at least `run.batchMinInterval` after the previous pod-triggered one. No pod waits
longer than the largest of the three (plus a cycle already running); a lone pod after a quiet spell
is still planned after the idle period.

Pure and clock-free: the caller passes `time.monotonic()` and serialises the calls (the pod watch's
thread of the cluster cache adds, the plan stage's thread asks and takes).
"""

from __future__ import annotations

from dataclasses import dataclass

_NAMED = 3  # pods a batch names in the log line; the rest are counted


@dataclass(frozen=True)
class Batch:
    """The new pending pods a cycle plans: how many, the first few, when the first was seen."""

    count: int
    first: tuple[str, ...]
    opened: float


class PodBatcher:
    """Collects pods reported unschedulable and says when their cycle is due. Constant memory: a
    batch is a count and a few names (the watch reports each pod once per transition)."""

    def __init__(self, *, idle: float, max_duration: float, min_interval: float) -> None:
        self.idle = idle
        self.max_duration = max_duration
        self.min_interval = min_interval
        self._count = 0
        self._first: list[str] = []
        self._opened = 0.0  # when the open batch's first pod came
        self._last = 0.0  # when its latest pod came
        self._triggered: float | None = None  # when the last cycle this batcher triggered began

    def add(self, pod: str, now: float) -> None:
        """A pod became unschedulable at `now`: it opens a batch or joins (and extends) the open one."""
        if not self._count:
            self._opened = now
        self._count += 1
        if len(self._first) < _NAMED:
            self._first.append(pod)
        self._last = now

    def due(self) -> float | None:
        """When the open batch is to be planned; None when there is none."""
        if not self._count:
            return None
        close = min(self._last + self.idle, self._opened + self.max_duration)
        if self._triggered is not None:
            close = max(close, self._triggered + self.min_interval)
        return close

    def take(self, now: float) -> Batch | None:
        """The open batch, handed to a cycle beginning at `now` (whatever started it: that cycle
        plans every pod seen so far). A cycle that begins once the batch is due counts as triggered
        by it and starts the minimum interval; the interval's own cycle taking it early does not."""
        due = self.due()
        if due is None:
            return None
        if now >= due:
            self._triggered = now
        batch = Batch(self._count, tuple(self._first), self._opened)
        self._count, self._first = 0, []
        return batch
