"""What a node of a group costs an hour: for the `price` expander and the plan's monthly cost.

On-demand prices come from the table the runtime gives (the shipped us-east-1 table that `simulate`
and `what-if` use, with `expanderOptions.prices` over it). A group's purchase option is what AWS
will buy for it: a mixed-instances distribution's spot share (OnDemandPercentageAboveBaseCapacity),
or a template labelled as spot capacity (EKS managed node groups' `eks.amazonaws.com/capacityType`,
Karpenter's and the `node.kubernetes.io/lifecycle` convention); below the distribution's
OnDemandBaseCapacity AWS buys on-demand whatever the share, so the next node is priced on-demand
there (a raise that crosses the base is priced as its first node: over, never under). Spot is priced from
`expanderOptions.spotPrices`, else on-demand x (1 - `spotDiscount`). Unknown is unknown: never
guessed, and said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from reconciler.config.settings import ExpanderOptions
from reconciler.domain.model import NodeGroup, NodeTemplate

HOURS_PER_MONTH = 730  # AWS's own: 365 x 24 / 12
SPOT_LABELS = {
    "eks.amazonaws.com/capacityType": "SPOT",
    "karpenter.sh/capacity-type": "spot",
    "node.kubernetes.io/lifecycle": "spot",
}


@dataclass(frozen=True)
class NodePrice:
    """USD per hour of one new node of a group, and what that figure rests on."""

    hourly: float
    basis: str  # "m5.large at $0.0960/h on-demand", "... spot (60% below on-demand)"


def _labelled_spot(template: NodeTemplate | None) -> bool:
    labels = template.labels if template is not None else {}
    return any(labels.get(key) == value for key, value in SPOT_LABELS.items())


def spot_share(group: NodeGroup, template: NodeTemplate | None) -> float:
    if _labelled_spot(template):
        return 1.0
    return group.spot_share


def node_price(
    group: NodeGroup,
    template: NodeTemplate | None,
    on_demand: Mapping[str, float],
    options: ExpanderOptions,
) -> NodePrice | None:
    """None when the instance type has no price (neither the table nor the config names it)."""
    if template is None or not template.instance_type:
        return None
    kind = template.instance_type
    regular = options.prices.get(kind, on_demand.get(kind))
    share = spot_share(group, template)
    if share and group.desired < group.on_demand_base and not _labelled_spot(template):
        # the next nodes are on-demand whatever the share above the base: priced by the next one
        if regular is None:
            return None
        return NodePrice(
            regular,
            f"{kind} at ${regular:.4f}/h on-demand (the group's desired {group.desired} is below its "
            f"OnDemandBaseCapacity {group.on_demand_base})",
        )
    if share and kind in options.spot_prices:
        spot, spot_basis = options.spot_prices[kind], f"${options.spot_prices[kind]:.4f}/h spot"
    elif share and regular is not None:
        spot = regular * (1 - options.spot_discount)
        spot_basis = f"spot at {options.spot_discount:.0%} below on-demand"
    else:
        spot, spot_basis = None, ""
    if share == 0 or spot is None:
        if regular is None:
            return None
        return NodePrice(regular, f"{kind} at ${regular:.4f}/h on-demand")
    if share == 1 or regular is None:
        return NodePrice(spot, f"{kind} {spot_basis}")
    blended = share * spot + (1 - share) * regular
    return NodePrice(blended, f"{kind} {share:.0%} {spot_basis}, the rest ${regular:.4f}/h on-demand")


def monthly(price: NodePrice, nodes: int) -> float:
    return round(price.hourly * nodes * HOURS_PER_MONTH, 2)


def raise_price(
    group: NodeGroup,
    template: NodeTemplate | None,
    nodes: int,
    units: int,
    on_demand: Mapping[str, float],
    options: ExpanderOptions,
) -> NodePrice | None:
    """What a raise of `nodes` template nodes (`units` of desired) costs an hour, at most.

    One instance type: nodes x its price. A mixed-instances group may launch any override: each unit
    of desired is priced as the priciest override per unit (price / WeightedCapacity), so the figure
    is an upper bound whichever AWS launches; an override without a price leaves the template's
    price, said as a lower bound."""
    single = node_price(group, template, on_demand, options)
    types = tuple(dict.fromkeys(group.instance_types))
    if template is None or len(types) < 2:
        return None if single is None else NodePrice(single.hourly * nodes, f"{nodes} x {single.basis}")
    per_unit: list[tuple[float, str]] = []
    for name in types:
        price = node_price(group, replace(template, instance_type=name), on_demand, options)
        if price is None:
            if single is None:
                return None
            return NodePrice(
                single.hourly * nodes, f"at least {nodes} x {single.basis} ({name} has no price)"
            )
        weight = max(1, group.instance_weights.get(name, 1))
        per_unit.append((price.hourly / weight, price.basis))
    worst, basis = max(per_unit)
    return NodePrice(
        worst * units,
        f"at most {units} unit(s) of desired at ${worst:.4f}/h each ({basis}, the priciest of its "
        "overrides per unit: AWS may launch any of them)",
    )
