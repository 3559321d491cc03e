"""`least-nodes`: the option that adds the fewest nodes."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "least-nodes"


class LeastNodes:
    name = NAME

    def choose(self, options: Sequence[Option]) -> list[Option]:
        if not options:
            return []
        best = min(o.node_count for o in options)
        return [o for o in options if o.node_count == best]


def create(options: ExpanderOptions) -> LeastNodes:
    return LeastNodes()
