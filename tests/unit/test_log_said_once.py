"""`run` says a standing warning or decision once, not every cycle (issue 20: an idle deployment
writes nothing, its log included): a line whose words only move with time (`empty for 2s`, then
`3s`, then `1h5m`; a utilisation percentage) is the same line; a changed decision is new."""

from __future__ import annotations

from reconciler.domain.durations import standing
from reconciler.telemetry.logs import SaidOnce

WAITING = "general scale-down 3 -> 2 (remove i-0abc (node-c): empty for {})"


def test_a_standing_decision_whose_age_moves_is_said_once() -> None:
    said = SaidOnce()
    assert said.new("plan-decisions", [WAITING.format("2s")]) == [WAITING.format("2s")]
    for age in ("3s", "59s", "1m", "1h5m", "25h"):
        assert said.new("plan-decisions", [WAITING.format(age)]) == [], age


def test_a_changed_decision_or_one_that_comes_back_is_said_again() -> None:
    said = SaidOnce()
    said.new("plan-decisions", [WAITING.format("2s")])
    other = "general scale-down 3 -> 1 (remove i-0abc (node-c), i-0def (node-d): empty for 3s)"
    assert said.new("plan-decisions", [other]) == [other]  # another removal: news
    assert said.new("plan-decisions", []) == []
    assert said.new("plan-decisions", [WAITING.format("9s")]) == [WAITING.format("9s")]  # back again


def test_keys_are_apart_and_counts_are_not_durations() -> None:
    said = SaidOnce()
    line = "node groups: 3 found"
    assert said.new("plan", [line]) == [line]
    assert said.new("apply", [line]) == [line]  # another key: said there too
    assert said.new("plan", ["node groups: 4 found"]) == ["node groups: 4 found"]
    assert said.new("plan", ["utilisation 41% < 50% for 2m"]) == ["utilisation 41% < 50% for 2m"]
    assert said.new("plan", ["utilisation 38% < 50% for 3m"]) == []  # the same condition, still standing


def test_standing_masks_durations_and_percentages_only() -> None:
    moving = "approved 25h ago, opens in 3h, utilisation 62%"
    assert standing(moving) == "approved # ago, opens in #, utilisation #"
    assert standing("empty for 1h5m") == standing("empty for 12s") == "empty for #"
    fixed = "scale-up 2 -> 3 (1 × t3.small, i-0a1b2c3d)"
    assert standing(fixed) == fixed
