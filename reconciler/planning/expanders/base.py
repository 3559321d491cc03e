"""The expander interface: given the groups that could help, keep the best ones.

An expander is a filter, not a picker, so they chain (`priority,least-waste`): each narrows the
options the previous one left, and the chain breaks any remaining tie by group name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.domain.model import NodeTemplate, Pod


@dataclass(frozen=True, slots=True)
class Option:
    """One way to help: add `node_count` nodes of `template` to `group`, placing `pods`."""

    group: str
    node_count: int
    pods: tuple[Pod, ...]
    template: NodeTemplate
    hourly_price: float | None = None  # USD an hour for one new node of the group (planning/pricing.py)


class Expander(Protocol):
    """Keeps the best options; returns a non-empty subset of a non-empty input, in input order."""

    name: str

    def choose(self, options: Sequence[Option]) -> list[Option]: ...
