"""`least-waste`: the option leaving the smallest unrequested share of what it adds.

cluster-autoscaler's score, exactly: with C and M the CPU and memory *capacity* of one new node (CA
reads the template's capacity, not allocatable), n the node count and c, m the summed requests of the
pods placed,  score = (n·C − c)/(n·C) + (n·M − m)/(n·M).  Lowest wins. Computed with fractions so
equal scores tie exactly and the next expander (or the name) decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reconciler.config.settings import ExpanderOptions
from reconciler.planning.expanders.base import Option

NAME = "least-waste"


def _wasted(available: int, requested: int) -> Fraction:
    if available <= 0:
        return Fraction(1)  # a template without capacity wastes all it claims to add
    return Fraction(available - requested, available)


def score(option: Option) -> Fraction:
    template = option.template
    node_cpu = template.capacity.cpu or template.allocatable.cpu
    node_mem = template.capacity.memory or template.allocatable.memory
    cpu = sum(p.requests.cpu for p in option.pods)
    mem = sum(p.requests.memory for p in option.pods)
    n = option.node_count
    return _wasted(n * node_cpu, cpu) + _wasted(n * node_mem, mem)


class LeastWaste:
    name = NAME

    def choose(self, options: Sequence[Option]) -> list[Option]:
        if not options:
            return []
        scores = [score(o) for o in options]
        best = min(scores)
        return [o for o, s in zip(options, scores, strict=True) if s == best]


def create(options: ExpanderOptions) -> LeastWaste:
    return LeastWaste()
