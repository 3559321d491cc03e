"""`priority`: the options whose group name matches the highest-priority regex.

As CA's priority expander: `expanderOptions.priorities` maps a priority to regexes; a group's
priority is the highest one with a regex found anywhere in its name (an unanchored search, as Go's
`FindStringIndex`; anchor with ^...$ to match whole names). Groups matching no regex are dropped;
if no option matches at all, every option is kept (CA falls back the same way).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "priority"


class Priority:
    name = NAME

    def __init__(self, priorities: Sequence[tuple[int, Sequence[str]]]) -> None:
        ordered = sorted(priorities, key=lambda item: item[0], reverse=True)
        self.rules: tuple[tuple[int, tuple[re.Pattern[str], ...]], ...] = tuple(
            (prio, tuple(re.compile(p) for p in patterns)) for prio, patterns in ordered
        )

    def priority_of(self, group: str) -> int | None:
        for prio, patterns in self.rules:
            if any(p.search(group) for p in patterns):
                return prio
        return None

    def choose(self, options: Sequence[Option]) -> list[Option]:
        ranked = [(self.priority_of(o.group), o) for o in options]
        matched = [p for p, _ in ranked if p is not None]
        if not matched:
            return list(options)
        best = max(matched)
        return [o for p, o in ranked if p == best]


def create(options: ExpanderOptions) -> Priority:
    return Priority(options.priorities)
