"""Found by an attack (issue 20 item 3, docs/operations.md "The wake-up hint"): "a forged one costs one early
ls-remote (at most one a second, however many hints come)". The pacing must bound the ls-remotes a
flood brings forward without locking out the genuine hint that follows it: each hint the loop takes
pushes `_hint_ready` another second into the future, even hints that brought nothing forward, so a
flood of N forged values (the watch reports each distinct one) disables the hint for ~N seconds and
apply falls back to its poll."""

from __future__ import annotations

import threading

from reconciler.runtime.stage_loop import Stage


def stage(now: float, poll: float) -> Stage:
    found = object.__new__(Stage)
    found._flags = threading.Lock()
    found._hinted = None
    found._hint_ready = 0.0
    found._woken_for = None
    found.tried_head = "a" * 40
    found.next_poll = now + poll
    found.wake = threading.Event()
    return found


def test_one_hint_brings_the_poll_forward_to_now() -> None:
    s = stage(1000.0, 5.0)
    s.hint("b" * 40)
    s._take_hint(1000.0)
    assert s.next_poll == 1000.0 and s._woken_for == "b" * 40


def test_a_flood_of_forged_hints_does_not_lock_out_the_genuine_one() -> None:
    now, poll = 1000.0, 5.0
    s = stage(now, poll)
    # 10 s of a flood: 100 distinct forged values a second, each taken by one turn of the loop
    for n in range(1000):
        t = now + n / 100
        s.hint(f"{n:040x}")
        s._take_hint(t)
        if t >= s.next_poll:  # the loop's ls-remote: nothing new on main
            s.next_poll = t + poll
    end = now + 10.0
    s.next_poll = end + poll  # the poll just ran at the end of the flood
    # the plan stage pushes for real one second after the flood stopped
    genuine = "f" * 40
    s.hint(genuine)
    s._take_hint(end + 1.0)
    assert s.next_poll <= end + 1.0 + 1.0, (  # within the documented pace of a second
        f"the genuine hint waits {s.next_poll - (end + 1.0):.0f}s "
        f"(pace window at +{s._hint_ready - end:.0f}s)"
    )
