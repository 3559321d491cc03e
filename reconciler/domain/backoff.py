"""The one backoff schedule: capped doubling with jitter, for every retry and every loop that waits
after a failure (Kubernetes, AWS, Git, the forge, the `run` loop, the planner's group backoff).

The n-th wait (n from 0) is `first * factor**n`, never more than `cap`, then scaled by a random
factor drawn uniformly from [low, high] so that replicas or writers that failed together do not come
back together. The usual spreads, by name:
- none, (1, 1): the bare schedule; the planner's group backoff, which must be reproducible;
- client-go's `wait.Backoff` with Jitter j, (1, 1 + j);
- "equal jitter", (0.5, 1): never less than half the schedule (drains, watches, leases);
- "full jitter", (0, 1): writers racing for one Git ref part fastest (AWS's backoff study).

Pure: the random source is given, no clock and no sleeping; callers sleep on what `delay` answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_MAX_EXPONENT = 62  # a fault lasting days (n in the millions) never overflows a float

NO_JITTER = (1.0, 1.0)
EQUAL_JITTER = (0.5, 1.0)
FULL_JITTER = (0.0, 1.0)


@dataclass(frozen=True)
class Backoff:
    first: float  # seconds of the first wait (before its spread)
    cap: float  # no wait (before its spread) is longer than this
    factor: float = 2.0
    spread: tuple[float, float] = NO_JITTER  # the random factor's range, [low, high]

    def __post_init__(self) -> None:
        low, high = self.spread
        if self.first < 0 or self.cap < self.first or self.factor < 1 or not 0 <= low <= high:
            raise ValueError(f"backoff: invalid schedule {self!r}")

    def base(self, n: int) -> float:
        """The n-th wait (n >= 0) before its spread: first * factor**n, capped."""
        return min(self.cap, self.first * self.factor ** min(max(n, 0), _MAX_EXPONENT))

    def delay(self, n: int, rand: Callable[[], float] = random.random) -> float:
        """The n-th wait (n >= 0), scaled by a factor drawn from `spread` with `rand` (in [0, 1))."""
        low, high = self.spread
        return self.base(n) * (low + (high - low) * rand()) if high != low else self.base(n) * low

    def delays(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """Every wait in turn, without end: `for wait in schedule.delays(): ...`."""
        n = 0
        while True:
            yield self.delay(n, rand)
            n += 1
