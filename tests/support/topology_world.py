"""Spread constraints in one line, for the topology tests."""

from __future__ import annotations

from reconciler.domain.model import (
    ZONE_LABEL,
    LabelSelector,
    Scheduling,
    TopologySpreadConstraint,
)
from tests.support.planning_factories import selector


def spread(
    key: str = ZONE_LABEL,
    skew: int = 1,
    *,
    app: str = "web",
    min_domains: int | None = None,
    affinity_policy: str = "Honor",
    taints_policy: str = "Ignore",
    match_label_keys: tuple[str, ...] = (),
    node_selector: tuple[tuple[str, str], ...] = (),
    label_selector: LabelSelector | None = None,
) -> Scheduling:
    c = TopologySpreadConstraint(
        skew,
        key,
        "DoNotSchedule",
        selector(app=app) if label_selector is None else label_selector,
        min_domains,
        affinity_policy,
        taints_policy,
        match_label_keys,
    )
    return Scheduling(node_selector=node_selector, topology_spread=(c,))
