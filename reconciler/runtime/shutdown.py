"""The `run` loop's stop request (SIGTERM, Ctrl-C) and the grace period it leaves."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# What a finished drain still has to do before the process is gone: the intent record, the
# terminate call, the result record, the Leases given back. A drain may go on only if it ends this
# long before the grace period does (a quarter of the period when that is shorter).
AFTER_DRAIN = 20.0


class Shutdown:
    """The stop request, with the grace period it leaves (`run.shutdownGracePeriod`): a step that
    ends in time to finish what follows it may finish; a longer one is abandoned safely
    (LoopHooks.stopping)."""

    def __init__(self, grace: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.event = threading.Event()
        self.grace = grace
        self._clock = clock
        self._deadline: float | None = None

    def request(self) -> None:
        if self._deadline is None:
            self._deadline = self._clock() + self.grace - min(AFTER_DRAIN, self.grace / 4)
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def stopping(self, finishes_by: float) -> bool:
        return self._deadline is not None and finishes_by > self._deadline

    def sleep(self, seconds: float) -> bool:
        """Wait up to `seconds`; True when the stop was requested meanwhile."""
        return self.event.wait(max(0.0, seconds))
