"""The one backoff schedule: capped doubling with jitter, for every retry and every loop that waits
after a failure (Kubernetes, AWS, Git, the forge, the `run` loop, the planner's group backoff).

client-go's `wait.Backoff` semantics: the n-th wait (n from 0) is `first * factor**n`, never more
than `cap`, then stretched by up to `jitter` of itself at random (so replicas that failed together
do not come back together; client-go's `wait.Jitter`). `jitter=0` gives the bare schedule, which the
planner uses (its backoff is a pure function of state and must be reproducible).

Pure: the random source is given, no clock, no sleeping; callers sleep on what `delay` answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_MAX_EXPONENT = 62  # a fault lasting days (n in the millions) never overflows a float


@dataclass(frozen=True)
class Backoff:
    first: float  # seconds before the second try
    cap: float  # no wait (before jitter) is longer than this
    factor: float = 2.0
    jitter: float = 0.0  # up to this fraction of a wait is added at random

    def __post_init__(self) -> None:
        if self.first < 0 or self.cap < self.first or self.factor < 1 or self.jitter < 0:
            raise ValueError(f"backoff: invalid schedule {self!r}")

    def base(self, n: int) -> float:
        """The n-th wait (n >= 0) without jitter: first * factor**n, capped."""
        if n <= 0:
            return min(self.first, self.cap)
        return min(self.cap, self.first * self.factor ** min(n, _MAX_EXPONENT))

    def delay(self, n: int, rand: Callable[[], float] = random.random) -> float:
        """The n-th wait (n >= 0) with its jitter drawn from `rand` (uniform in [0, 1))."""
        wait = self.base(n)
        return wait + wait * self.jitter * rand() if self.jitter else wait

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """Every wait in turn, without end: `for wait in schedule.delays(): ...`."""
        n = 0
        while True:
            yield self.delay(n, rand)
            n += 1
