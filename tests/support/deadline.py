"""A guard for tests of inputs built to hang the code (YAML bombs, endless nesting): a regression
fails the test after a generous limit instead of hanging the suite. Not a speed measurement
(benchmarks/ does that): the limit is far above what the code needs on a loaded machine."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the test if the block runs longer than `seconds` (SIGALRM; the main thread only).

    `pytest.fail` raises a BaseException, so no `except Exception` in the code under test can
    swallow it and turn a hang into an ordinary error."""

    def expired(_signum: int, _frame: FrameType | None) -> None:
        pytest.fail(f"still running after {seconds:g}s: the input was not refused before expanding it")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
