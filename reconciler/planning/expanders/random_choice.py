"""`random`: one option at random, but reproducibly.

CA draws from a process-wide generator; a plan must be repeatable (the same input gives the same
commit), so the draw is seeded from `expanderOptions.randomSeed` and the sorted candidate names:
the same candidates always give the same pick, different candidate sets spread over the groups.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "random"


class RandomChoice:
    name = NAME

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def choose(self, options: Sequence[Option]) -> list[Option]:
        if not options:
            return []
        names = sorted({o.group for o in options})
        rng = random.Random(f"{self.seed}:{','.join(names)}")
        pick = rng.choice(names)
        return [o for o in options if o.group == pick]


def create(options: ExpanderOptions) -> RandomChoice:
    return RandomChoice(options.random_seed)
