"""Expanders: which node group grows when several could help.

One module per policy, each exposing `NAME` and `create(ExpanderOptions)`; a new policy is a new
module plus its line in `FACTORIES`. `build_chain(config.expander, config.expander_options)` gives
the chain the planner uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders import least_nodes, least_waste, most_pods, price, priority, random_choice
from reconciler.planning.expanders.base import Expander, Option

FACTORIES: dict[str, Callable[[ExpanderOptions], Expander]] = {
    least_waste.NAME: least_waste.create,
    most_pods.NAME: most_pods.create,
    least_nodes.NAME: least_nodes.create,
    random_choice.NAME: random_choice.create,
    priority.NAME: priority.create,
    price.NAME: price.create,
}


class Chain:
    """Expanders applied in order, each narrowing what the previous kept; the remaining tie goes to
    the alphabetically first group name, so a plan never depends on input order."""

    def __init__(self, expanders: Sequence[Expander]) -> None:
        self.expanders = tuple(expanders)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.expanders)

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        """The options every expander kept, sorted by group name (then node count)."""
        kept = list(options)
        for expander in self.expanders:
            if len(kept) <= 1:
                break
            narrowed = expander.choose(kept)
            if narrowed:
                kept = narrowed
        return sorted(kept, key=lambda o: (o.group, o.node_count))

    def best(self, options: Sequence[Option]) -> Option | None:
        kept = self.best_options(options)
        return kept[0] if kept else None


DEFAULT_OPTIONS = ExpanderOptions()


def build_chain(names: Sequence[str], options: ExpanderOptions = DEFAULT_OPTIONS) -> Chain:
    """`names` as in config (`("priority", "least-waste")`); unknown names raise ValueError."""
    expanders: list[Expander] = []
    for name in names:
        factory = FACTORIES.get(name.strip())
        if factory is None:
            known = ", ".join(sorted(FACTORIES))
            raise ValueError(f"unknown expander {name!r} (known: {known})")
        expanders.append(factory(options))
    return Chain(expanders)


__all__ = ["FACTORIES", "Chain", "Expander", "Option", "build_chain"]
