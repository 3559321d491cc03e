"""Property: whatever the cluster, no scale-down leaves a moved pod where the scheduler would not
put it. Small random clusters over two or three zones, controllers with zone spread (with and
without minDomains), zone affinity to another controller, zone anti-affinity to themselves; after
the plan's removals, every moved pod is judged again from scratch (a fresh Topology over the nodes
that stay), so a counting mistake in the incremental bookkeeping cannot hide itself."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.domain.model import ZONE_LABEL, Pod, PodAffinityTerm, Scheduling, TopologySpreadConstraint
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import PredicateContext, check
from reconciler.planning.topology import Topology
from tests.support.planning_factories import selector
from tests.support.scale_down_world import grp, n, on, run, world

KINDS = ("spread", "spread2", "spread-min3", "affinity", "anti", "plain")


def scheduling_for(kind: str, app: str, partner: str) -> Scheduling:
    if kind.startswith("spread"):
        skew = 2 if kind == "spread2" else 1
        min_domains = 3 if kind == "spread-min3" else None
        c = TopologySpreadConstraint(skew, ZONE_LABEL, "DoNotSchedule", selector(app=app), min_domains)
        return Scheduling(topology_spread=(c,))
    if kind == "affinity":
        return Scheduling(pod_affinity=(PodAffinityTerm(selector(app=partner), ZONE_LABEL),))
    if kind == "anti":
        return Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app=app), ZONE_LABEL),))
    return Scheduling()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[Pod]]:
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"][: draw(st.integers(2, 3))]
    nodes = [(f"{z[-1]}{i}", z) for z in zones for i in range(draw(st.integers(1, 3)))]
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=4))
    pods: list[Pod] = []
    for j, kind in enumerate(kinds):
        app = f"app{j}"
        scheduling = scheduling_for(kind, app, "app0")
        for k in range(draw(st.integers(0, 4))):
            where = draw(st.sampled_from(nodes))[0]
            cpu = draw(st.sampled_from([100, 400, 900]))
            pods.append(on(where, f"{app}-{k}", cpu, labels={"app": app}, scheduling=scheduling, owner=app))
    for name, _ in nodes:
        filler = draw(st.sampled_from([0, 0, 1000, 2500]))
        if filler:
            pods.append(on(name, f"fill-{name}", filler, owner=f"fill-{name}"))
    return nodes, pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_no_scale_down_leaves_a_moved_pod_breaking_a_constraint(
    cluster: tuple[list[tuple[str, str]], list[Pod]],
) -> None:
    nodes, pods = cluster
    made = [n(name, labels={ZONE_LABEL: zone}) for name, zone in nodes]
    inv = world([grp("asg", made)], pods)
    result, pool = run(inv)
    if not result.moves:
        return
    stay = [node for node in pool.nodes if not pool.is_retired(node.name)]
    fresh = NodePool(stay, PredicateContext(topology=Topology(None)))
    topology = fresh.ctx.topology
    assert topology is not None
    final: dict[int, tuple[Pod, str]] = {}  # a pod moved twice (its first home went too) ends at the last
    for moves in result.moves.values():
        for moved, dest in moves:
            final[id(moved)] = (moved, dest)
    for moved, dest in final.values():
        if True:
            node = fresh.get(dest)
            assert node is not None and not pool.is_retired(dest)
            node.remove(moved)
            topology.pod_removed(moved, node)
            try:
                assert check(moved, node, fresh.ctx) is None, (moved.key, dest)
            finally:
                node.add(moved)
                topology.pod_added(moved, node)


def test_a_later_removal_that_would_strand_an_earlier_move_keeps_its_node() -> None:
    """maxSkew 2 over zones a, b, c. Removing c2 moves web-p to a1 (a: 3, min 1: fine). Removing b1
    next would send web-q to c1 and leave zone b (b2, full) with none: min 0, and web-p in zone a
    three ahead. The scheduler would not have put web-p there in that cluster, so b1 stays."""
    spread = scheduling_for("spread2", "web", "")
    zone = {"a": "us-east-1a", "b": "us-east-1b", "c": "us-east-1c"}
    made = [n(name, labels={ZONE_LABEL: zone[name[0]]}) for name in ("a1", "b1", "b2", "c1", "c2")]

    def web(node: str, name: str) -> Pod:
        return on(node, name, 100, labels={"app": "web"}, scheduling=spread, owner="web")

    pods = [
        web("a1", "web-a0"), web("a1", "web-a1"), on("a1", "fill-a1", 2500, owner="fill-a1"),
        web("b1", "web-q"), on("b1", "extra-b1", 300, owner="extra-b1"),
        on("b2", "fill-b2", 3950, owner="fill-b2"),
        web("c1", "web-c0"), on("c1", "fill-c1", 2500, owner="fill-c1"),
        web("c2", "web-p"),
    ]  # fmt: skip
    result, _ = run(world([grp("asg", made)], pods))
    assert [(p.name, dest) for p, dest in result.moves["c2"]] == [("web-p", "a1")]
    assert "b1" not in result.moves
    reason = next(u.reason for u in result.unremovable if u.node == "b1")
    assert reason.startswith("moving its pods would leave pod default/web-p on a1: topology spread on")
