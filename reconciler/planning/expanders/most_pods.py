"""`most-pods`: the option that places the most pending pods."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "most-pods"


class MostPods:
    name = NAME

    def choose(self, options: Sequence[Option]) -> list[Option]:
        if not options:
            return []
        best = max(len(o.pods) for o in options)
        return [o for o in options if len(o.pods) == best]


def create(options: ExpanderOptions) -> MostPods:
    return MostPods()
