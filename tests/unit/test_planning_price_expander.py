"""Issue 29 item 4: the `price` expander and what a node of a group costs (planning/pricing.py)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.config.settings import ExpanderOptions
from reconciler.domain.model import NodeGroup
from reconciler.planning.expanders import build_chain
from reconciler.planning.expanders.base import Option
from reconciler.planning.expanders.price import Price
from reconciler.planning.pricing import HOURS_PER_MONTH, monthly, node_price
from tests.support.plan_world import NOW
from tests.support.planning_factories import pod, template

PODS = tuple(pod(f"web-{i}", cpu=500, mem_gi=1) for i in range(4))


def option(group: str, nodes: int, price: float | None, pods: tuple = PODS) -> Option:  # type: ignore[type-arg]
    return Option(group, nodes, pods, template(), price)


def group(name: str = "g", spot_share: float = 0.0) -> NodeGroup:
    return NodeGroup(name, 0, 10, 0, (), ("us-east-1a",), {}, spot_share=spot_share)


def test_the_cheapest_placement_of_the_same_pods_wins() -> None:
    options = [option("m5", 2, 0.096), option("c5", 2, 0.085), option("r5", 1, 0.252)]
    assert [o.group for o in Price().choose(options)] == ["c5"]  # 0.170 < 0.192 < 0.252


def test_fewer_bigger_nodes_win_when_they_cost_less_in_all() -> None:
    options = [option("small", 4, 0.0416), option("big", 1, 0.154)]  # 0.1664 vs 0.154
    assert [o.group for o in Price().choose(options)] == ["big"]


def test_an_option_placing_fewer_pods_is_judged_by_cost_per_pod_placed() -> None:
    cheap_but_partial = option("cheap", 1, 0.05, pods=PODS[:1])
    everything = option("all", 1, 0.10, pods=PODS)
    assert [o.group for o in Price().choose([cheap_but_partial, everything])] == ["all"]


def test_an_unpriced_option_loses_to_a_priced_one_and_ties_with_another() -> None:
    assert [o.group for o in Price().choose([option("x", 1, None), option("y", 9, 1.0)])] == ["y"]
    assert [o.group for o in Price().choose([option("x", 1, None), option("z", 2, None)])] == ["x", "z"]


def test_a_chain_breaks_the_price_tie_with_the_next_expander() -> None:
    chain = build_chain(["price", "least-nodes"])
    best = chain.best([option("a", 2, 0.05), option("b", 1, 0.10)])
    assert best is not None and best.group == "b"  # same cost; fewer nodes


def test_a_node_is_priced_on_demand_from_the_table_and_the_config_over_it() -> None:
    table = {"m5.xlarge": 0.192}
    price = node_price(group(), template(), table, ExpanderOptions())
    assert price is not None and price.hourly == 0.192 and "on-demand" in price.basis
    overridden = node_price(group(), template(), table, ExpanderOptions(prices={"m5.xlarge": 0.15}))
    assert overridden is not None and overridden.hourly == 0.15
    assert node_price(group(), template(instance_type="x9.huge"), table, ExpanderOptions()) is None


def test_spot_capacity_is_priced_from_the_spot_price_else_the_discount() -> None:
    table = {"m5.xlarge": 0.2}
    spot = node_price(group(spot_share=1.0), template(), table, ExpanderOptions(spot_discount=0.7))
    assert spot is not None and spot.hourly == pytest.approx(0.06) and "spot" in spot.basis
    named = node_price(
        group(spot_share=1.0), template(), table, ExpanderOptions(spot_prices={"m5.xlarge": 0.05})
    )
    assert named is not None and named.hourly == 0.05
    half = node_price(group(spot_share=0.5), template(), table, ExpanderOptions(spot_discount=0.6))
    assert half is not None and half.hourly == pytest.approx(0.5 * 0.08 + 0.5 * 0.2)


def test_a_template_labelled_spot_is_priced_as_spot() -> None:
    labelled = template(labels={"eks.amazonaws.com/capacityType": "SPOT"})
    price = node_price(group(), labelled, {"m5.xlarge": 0.2}, ExpanderOptions(spot_discount=0.5))
    assert price is not None and price.hourly == pytest.approx(0.1)


def test_a_month_is_730_hours() -> None:
    price = node_price(group(), template(), {"m5.xlarge": 0.192}, ExpanderOptions())
    assert price is not None and monthly(price, 3) == round(0.192 * 3 * HOURS_PER_MONTH, 2) == 420.48


def _priced_plan(region: str, instance_type: str, prices: dict[str, float]) -> Any:
    from dataclasses import replace

    from reconciler.planning.plan import make_plan
    from reconciler.planning.types import PlanInputs
    from tests.support.plan_world import World, make_config
    from tests.support.plan_world import template as world_template

    world = World().group("g", tmpl=world_template(instance_type=instance_type))
    world.pending("api-0", cpu=1000)
    config = replace(make_config(), region=region)
    inputs = PlanInputs(
        inventory=world.inventory(), config=config, now=NOW, prices=prices, prices_region="us-east-1"
    )
    return make_plan(inputs).group("g")


def test_a_cost_from_another_regions_list_says_so() -> None:
    """Found by the new-user trial: in eu-west-1 the commit gave the us-east-1 price as if it were
    the cluster's."""
    home = _priced_plan("us-east-1", "m5.xlarge", {"m5.xlarge": 0.192})
    assert home.monthly_cost == round(0.192 * 730, 2) and "list prices" not in home.cost_basis
    away = _priced_plan("eu-west-1", "m5.xlarge", {"m5.xlarge": 0.192})
    assert "us-east-1 list prices, set expanderOptions.prices for eu-west-1" in away.cost_basis


def test_a_raise_of_a_type_without_a_price_says_its_cost_is_unknown() -> None:
    group = _priced_plan("us-east-1", "g9.odd", {"m5.xlarge": 0.192})
    assert group.monthly_cost is None
    assert group.reasons[-1] == "cost unknown: no price for g9.odd (give it in expanderOptions.prices)"
