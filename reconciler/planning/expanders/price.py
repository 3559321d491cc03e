"""`price`: the cheapest way to place the pending pods.

cluster-autoscaler has a `price` expander only where its cloud provider prices nodes (GCE); on AWS
it has none (its #2024). Here an option's cost is its node count x the hourly price of one node of
the group (planning/pricing.py: the on-demand table, the group's spot share, the config's prices).
Options that place the same pods compare by that cost alone; options that place different pods
compare by cost per unit of what they place, each pod valued at its CPU and memory requests at
the reference rates below (an m5-like USD per vCPU-hour and per GiB-hour), so a cheap option that
places nothing much does not beat one that places everything. Lowest wins. An option without a
price loses to any priced one and ties with the other unpriced (the next expander decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "price"
GIB = 2**30
# Reference rates for valuing pods, from a linear fit of m5/c5/r5 on-demand prices (us-east-1):
# only their ratio matters, and only when options place different pods.
CPU_CORE_HOUR = Fraction("0.037")
GIB_HOUR = Fraction("0.00275")


def pods_value(option: Option) -> Fraction:
    cpu = sum(p.requests.cpu for p in option.pods)
    memory = sum(p.requests.memory for p in option.pods)
    return CPU_CORE_HOUR * cpu / 1000 + GIB_HOUR * Fraction(memory, GIB)


def cost(option: Option) -> Fraction | None:
    if option.hourly_price is None:
        return None
    return Fraction(option.hourly_price).limit_denominator(10**9) * option.node_count


def score(option: Option, same_pods: bool) -> Fraction | None:
    total = cost(option)
    if total is None or same_pods:
        return total
    value = pods_value(option)
    return total / value if value > 0 else total * 10**6


class Price:
    name = NAME

    def choose(self, options: Sequence[Option]) -> list[Option]:
        if not options:
            return []
        placed = {frozenset(p.key for p in o.pods) for o in options}
        same_pods = len(placed) == 1
        scores = [score(o, same_pods) for o in options]
        priced = [s for s in scores if s is not None]
        if not priced:
            return list(options)
        best = min(priced)
        return [o for o, s in zip(options, scores, strict=True) if s == best]


def create(options: ExpanderOptions) -> Price:
    return Price()
