"""Expanders one by one, chains, and deterministic tie-breaking."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reconciler.config.settings import ExpanderOptions
from reconciler.domain.model import Resources
from reconciler.planning.expanders import FACTORIES, build_chain
from reconciler.planning.expanders.base import Option
from reconciler.planning.expanders.least_nodes import LeastNodes
from reconciler.planning.expanders.least_waste import LeastWaste, score
from reconciler.planning.expanders.most_pods import MostPods
from reconciler.planning.expanders.priority import Priority
from reconciler.planning.expanders.random_choice import RandomChoice
from tests.support.planning_factories import GI, pod, template


def option(
    group: str,
    nodes: int,
    pods: int,
    cpu: int = 1000,
    mem_gi: float = 1,
    node_cpu: int = 4000,
    node_mem: float = 16,
) -> Option:
    return Option(
        group=group,
        node_count=nodes,
        pods=tuple(pod(f"{group}-{i}", cpu=cpu, mem_gi=mem_gi) for i in range(pods)),
        template=template(node_cpu, node_mem),
    )


def names(options: list[Option]) -> list[str]:
    return [o.group for o in options]


def test_least_waste_score_is_cas_formula() -> None:
    # 2 nodes x 4 cores x 16Gi; 3 pods x 1 core x 1Gi: (8-3)/8 + (32-3)/32
    assert score(option("a", 2, 3)) == Fraction(5, 8) + Fraction(29, 32)


def test_least_waste_uses_capacity_not_allocatable() -> None:
    tmpl = template(3500, 14, capacity=Resources.of(cpu=4000, memory=16 * GI, pods=110))
    o = Option("a", 1, (pod("p", cpu=1000, mem_gi=4),), tmpl)
    assert score(o) == Fraction(3, 4) + Fraction(3, 4)


def test_least_waste_picks_tightest_fit() -> None:
    small = option("small", 1, 3, node_cpu=4000, node_mem=4)
    large = option("large", 1, 3, node_cpu=16000, node_mem=64)
    assert names(LeastWaste().choose([large, small])) == ["small"]


def test_least_waste_keeps_exact_ties() -> None:
    a, b = option("a", 1, 2), option("b", 2, 4)  # same ratios
    assert names(LeastWaste().choose([a, b])) == ["a", "b"]


def test_most_pods_and_least_nodes() -> None:
    opts = [option("a", 3, 10), option("b", 1, 4), option("c", 2, 10)]
    assert names(MostPods().choose(opts)) == ["a", "c"]
    assert names(LeastNodes().choose(opts)) == ["b"]


def test_priority_highest_matching_regex_wins() -> None:
    expander = Priority([(10, (".*spot.*",)), (50, ("^gpu-",)), (1, (".*",))])
    opts = [option("ondemand-a", 1, 1), option("spot-a", 1, 1), option("spot-b", 1, 1)]
    assert names(expander.choose(opts)) == ["spot-a", "spot-b"]
    assert expander.priority_of("gpu-x") == 50
    assert expander.priority_of("xgpu-x") == 1  # anchored pattern
    assert expander.priority_of("my-spot-pool") == 10  # unanchored search, as CA


def test_priority_drops_unmatched_and_falls_back_when_none_match() -> None:
    expander = Priority([(10, ("^a$",))])
    assert names(expander.choose([option("a", 1, 1), option("b", 1, 1)])) == ["a"]
    assert names(expander.choose([option("b", 1, 1), option("c", 1, 1)])) == ["b", "c"]


def test_random_is_seeded_and_reproducible() -> None:
    opts = [option(g, 1, 1) for g in "abcdef"]
    first = RandomChoice(7).choose(opts)
    assert len(first) == 1
    assert RandomChoice(7).choose(list(reversed(opts))) == first  # order-independent
    picks = {RandomChoice(seed).choose(opts)[0].group for seed in range(40)}
    assert len(picks) > 1  # the seed matters


def test_chain_narrows_in_order_then_breaks_ties_by_name() -> None:
    opts = [
        option("z-spot", 2, 4, node_cpu=4000, node_mem=4),
        option("a-spot", 2, 4, node_cpu=4000, node_mem=4),
        option("b-spot", 1, 4, node_cpu=16000, node_mem=64),
        option("ondemand", 1, 4, node_cpu=4000, node_mem=4),
    ]
    opt = ExpanderOptions(priorities=((10, ("spot",)), (1, (".*",))))
    chain = build_chain(("priority", "least-waste"), opt)
    assert chain.names == ("priority", "least-waste")
    assert names(chain.best_options(opts)) == ["a-spot", "z-spot"]
    best = chain.best(opts)
    assert best is not None and best.group == "a-spot"
    assert chain.best(list(reversed(opts))) == best


def test_chain_with_no_options() -> None:
    assert build_chain(("least-waste",)).best([]) is None


def test_every_registered_expander_builds_and_keeps_a_non_empty_subset() -> None:
    opts = [option("a", 1, 2), option("b", 2, 3), option("c", 1, 1)]
    options = ExpanderOptions(priorities=((5, ("b",)),), random_seed=3)
    for name in FACTORIES:
        kept = build_chain((name,), options).best_options(opts)
        assert kept and all(o in opts for o in kept)


def test_unknown_expander_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown expander 'cheapest'"):
        build_chain(("cheapest",))
