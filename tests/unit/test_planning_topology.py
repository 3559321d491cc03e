"""Domain-wide constraints (planning/topology.py) against the scheduler's rules, both directions: where
the scheduler would place a pod the planner places it, where it would refuse the planner refuses."""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    Scheduling,
    Taint,
)
from reconciler.planning.equivalence import group_pods
from reconciler.planning.estimator import estimate
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import PredicateContext, check
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from tests.support.planning_factories import node, pod, selector, template
from tests.support.topology_world import spread

A, B, C = "us-east-1a", "us-east-1b", "us-east-1c"


def web(name: str, node_name: str = "", scheduling: Scheduling | None = None, **kw: object) -> Pod:
    return pod(name, labels={"app": "web"}, scheduling=scheduling or spread(), node_name=node_name, **kw)  # type: ignore[arg-type]


def pool_of(
    nodes: Iterable[tuple[str, str, Iterable[Pod]]],
    *,
    namespaces: dict[str, dict[str, str]] | None = None,
    labels: dict[str, dict[str, str]] | None = None,
    taints: dict[str, tuple[Taint, ...]] | None = None,
) -> NodePool:
    """(name, zone, pods) per node, in pool order."""
    sims = []
    for name, zone, pods in nodes:
        real = node(name, zone=zone, labels=(labels or {}).get(name), taints=(taints or {}).get(name, ()))
        sims.append(SimNode.from_node(real, [p for p in pods]))
    return NodePool(sims, PredicateContext(topology=Topology(namespaces)))


def where(pool: NodePool, p: Pod) -> str | None:
    return pool.fits_somewhere(p)


# ---------------------------------------------------------------------------------- zone spread


def test_zone_spread_places_in_the_emptiest_zones_and_refuses_the_full_one() -> None:
    pool = pool_of([("a1", A, [web("w0", "a1")]), ("b1", B, []), ("c1", C, [])])
    assert where(pool, web("new")) == "b1"
    a1 = pool.get("a1")
    assert a1 is not None
    assert check(web("new"), a1, pool.ctx) == (
        f"topology spread on {ZONE_LABEL}: {A} would hold 2 matching pods with this one, {B} holds 0: "
        "skew 2 > maxSkew 1"
    )


def test_zone_spread_allows_up_to_max_skew_over_the_minimum() -> None:
    pods = [web("w0", "a1"), web("w1", "b1"), web("w2", "c1")]
    pool = pool_of([("a1", A, pods[:1]), ("b1", B, pods[1:2]), ("c1", C, pods[2:])])
    placed = pool.place([web(f"n{i}") for i in range(6)])
    zones = sorted(name for _, name in placed.placed)
    assert zones == ["a1", "a1", "b1", "b1", "c1", "c1"]  # one per zone at a time, never 2 apart


def test_pods_of_other_namespaces_and_terminating_pods_do_not_count() -> None:
    from datetime import UTC, datetime

    other_ns = pod("x", namespace="other", labels={"app": "web"}, node_name="a1")
    leaving = pod("y", labels={"app": "web"}, node_name="a1")
    leaving = leaving._replace(deleting_since=datetime.now(UTC))
    pool = pool_of([("a1", A, [other_ns, leaving]), ("b1", B, [])])
    assert where(pool, web("new")) == "a1"


def test_min_domains_makes_the_minimum_zero_with_fewer_domains() -> None:
    pods = [web("w0", "a1"), web("w1", "b1")]
    plain = pool_of([("a1", A, pods[:1]), ("b1", B, pods[1:])])
    assert where(plain, web("new")) == "a1"  # 1 + 1 - 1 <= 1
    strict = pool_of([("a1", A, pods[:1]), ("b1", B, pods[1:])])
    assert where(strict, web("new", scheduling=spread(min_domains=3))) is None  # 2 domains < 3: min 0


def test_node_affinity_policy_honor_counts_only_nodes_the_pod_may_use() -> None:
    """Zone c holds no matching pod but the pod's selector rules its nodes out: with Honor (the
    default) zone c is no domain, so the minimum is 1 and zone a takes the pod; with Ignore it is 0."""
    pods = [web("w0", "a1"), web("w1", "b1")]
    labels = {"a1": {"pool": "x"}, "b1": {"pool": "x"}}
    nodes = [("a1", A, pods[:1]), ("b1", B, pods[1:]), ("c1", C, [])]
    honor = spread(node_selector=(("pool", "x"),))
    ignore = spread(node_selector=(("pool", "x"),), affinity_policy="Ignore")
    assert where(pool_of(nodes, labels=labels), web("new", scheduling=honor)) == "a1"
    assert where(pool_of(nodes, labels=labels), web("new", scheduling=ignore)) is None


def test_node_taints_policy_honor_leaves_out_tainted_domains() -> None:
    taint = (Taint("dedicated", "gpu", "NoSchedule"),)
    pods = [web("w0", "a1"), web("w1", "b1")]
    nodes = [("a1", A, pods[:1]), ("b1", B, pods[1:]), ("c1", C, [])]
    assert where(pool_of(nodes, taints={"c1": taint}), web("new")) is None  # Ignore: c counts, min 0
    honor = spread(taints_policy="Honor")
    assert where(pool_of(nodes, taints={"c1": taint}), web("new", scheduling=honor)) == "a1"


def test_match_label_keys_count_only_the_pods_own_revision() -> None:
    old = [pod(f"o{i}", labels={"app": "web", "rev": "1"}, node_name="a1") for i in range(3)]
    scheduling = spread(match_label_keys=("rev",))
    new = pod("n", labels={"app": "web", "rev": "2"}, scheduling=scheduling)
    pool = pool_of([("a1", A, old), ("b1", B, [])])
    assert where(pool, new) == "a1"  # the rev-1 pods are not counted
    plain = pod("n", labels={"app": "web", "rev": "2"}, scheduling=spread())
    assert where(pool_of([("a1", A, old), ("b1", B, [])]), plain) == "b1"


def test_an_empty_label_selector_counts_nothing_as_the_scheduler() -> None:
    pods = [web(f"w{i}", "a1") for i in range(3)]
    scheduling = spread(label_selector=LabelSelector())
    assert where(pool_of([("a1", A, pods), ("b1", B, [])]), web("n", scheduling=scheduling)) == "a1"


def test_a_node_without_the_key_is_refused() -> None:
    pool = pool_of([("a1", A, [])])
    odd = pod("x", scheduling=spread(key="rack"))
    a1 = pool.get("a1")
    assert a1 is not None
    assert check(odd, a1, pool.ctx) == "topology spread on rack: node has no rack label"


def test_hostname_spread_is_exact_with_a_real_minimum() -> None:
    """Every node holds one matching pod: a second one per node is within maxSkew 1 (the old
    assumption of an empty node somewhere refused it)."""
    host = spread(HOSTNAME_LABEL)
    pool = pool_of([(f"n{i}", A, [web(f"w{i}", f"n{i}", host)]) for i in range(3)])
    assert where(pool, web("new", scheduling=host)) == "n0"


# ---------------------------------------------------------------------------------- affinity


def affinity(app: str, key: str = ZONE_LABEL) -> Scheduling:
    return Scheduling(pod_affinity=(PodAffinityTerm(selector(app=app), key),))


def anti(app: str, key: str = ZONE_LABEL, **kw: object) -> Scheduling:
    return Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app=app), key, **kw),))  # type: ignore[arg-type]


def test_zone_affinity_goes_to_the_zone_of_a_matching_pod() -> None:
    db = pod("db", labels={"app": "db"}, node_name="b1")
    pool = pool_of([("a1", A, []), ("b1", B, [db]), ("b2", B, []), ("c1", C, [])])
    assert where(pool, pod("x", scheduling=affinity("db"))) == "b1"
    a1 = pool.get("a1")
    assert a1 is not None
    assert check(pod("x", scheduling=affinity("db")), a1, pool.ctx) == (
        f"required pod affinity on {ZONE_LABEL}: no matching pod in {A}"
    )


def test_the_first_pod_of_a_self_affine_set_goes_anywhere_the_rest_follow() -> None:
    pool = pool_of([("a1", A, []), ("b1", B, [])])
    first = pod("s0", labels={"app": "set"}, scheduling=affinity("set"))
    placed = pool.place([first, pod("s1", labels={"app": "set"}, scheduling=affinity("set"))])
    assert [n for _, n in placed.placed] == ["a1", "a1"]
    lonely = pool_of([("a1", A, []), ("b1", B, [])])
    assert where(lonely, pod("x", scheduling=affinity("db"))) is None  # not its own match: nowhere


def test_affinity_needs_one_pod_matching_every_term() -> None:
    terms = (PodAffinityTerm(selector(app="db"), ZONE_LABEL), PodAffinityTerm(selector(tier="x"), ZONE_LABEL))
    both = Scheduling(pod_affinity=terms)
    split = [pod("d", labels={"app": "db"}, node_name="a1"), pod("t", labels={"tier": "x"}, node_name="a1")]
    assert where(pool_of([("a1", A, split)]), pod("x", scheduling=both)) is None
    one = [pod("dt", labels={"app": "db", "tier": "x"}, node_name="b1")]
    assert where(pool_of([("a1", A, []), ("b1", B, one)]), pod("x", scheduling=both)) == "b1"


def test_zone_anti_affinity_keeps_out_of_zones_with_a_match_and_ignores_nodes_without_the_key() -> None:
    db = pod("db", labels={"app": "db"}, node_name="a1")
    pool = pool_of([("a1", A, [db]), ("a2", A, []), ("b1", B, [])])
    assert where(pool, pod("x", scheduling=anti("db"))) == "b1"
    keyless = pool_of([("a1", A, [db]), ("a2", A, [])])
    assert where(keyless, pod("x", scheduling=anti("db", key="rack"))) == "a1"


def test_a_placed_pods_zone_anti_affinity_keeps_its_targets_out() -> None:
    guard = pod("guard", labels={"app": "guard"}, scheduling=anti("web"), node_name="a1")
    pool = pool_of([("a1", A, [guard]), ("a2", A, []), ("b1", B, [])])
    assert where(pool, pod("w", labels={"app": "web"})) == "b1"
    assert where(pool, pod("other", labels={"app": "api"})) == "a1"


def test_namespace_selectors_resolve_through_namespace_labels() -> None:
    db = pod("db", namespace="data", labels={"app": "db"}, node_name="a1")
    namespaces = {"data": {"team": "data"}, "default": {}}
    term = PodAffinityTerm(selector(app="db"), ZONE_LABEL, namespace_selector=selector(team="data"))
    wants = pod("x", scheduling=Scheduling(pod_affinity=(term,)))
    assert where(pool_of([("a1", A, [db]), ("b1", B, [])], namespaces=namespaces), wants) == "a1"
    other = {"data": {"team": "other"}, "default": {}}
    assert where(pool_of([("a1", A, [db]), ("b1", B, [])], namespaces=other), wants) is None


# ---------------------------------------------------------------------------------- new nodes


def test_a_multi_zone_group_takes_spread_pods_only_where_every_zone_is_allowed() -> None:
    pool = pool_of([("a1", A, [web("w0", "a1")]), ("b1", B, []), ("c1", C, [])])
    multi = SimNode.from_template(template(), (), name="multi-template", zones=(A, B, C), group="multi")
    assert check(web("n"), multi, pool.ctx) == (
        f"topology spread on {ZONE_LABEL}: {A} would hold 2 matching pods with this one, {B} holds 0: "
        f"skew 2 > maxSkew 1; only {B}, {C} would do, and AWS picks the zone of a new node"
    )
    even = pool_of([("a1", A, []), ("b1", B, []), ("c1", C, [])])
    assert check(web("n"), multi, even.ctx) is None


def test_zone_affinity_is_never_certain_on_a_multi_zone_node() -> None:
    db = pod("db", labels={"app": "db"}, node_name="b1")
    pool = pool_of([("b1", B, [db])])
    multi = SimNode.from_template(template(), (), name="multi-template", zones=(A, B), group="multi")
    reason = check(pod("x", scheduling=affinity("db")), multi, pool.ctx)
    assert reason == (
        f"required pod affinity on {ZONE_LABEL}: no matching pod in every zone this node may launch in; "
        f"only {B} would do, and AWS picks the zone of a new node"
    )


def _single_zone_base(zone: str, cpu: int = 1000, mem_gi: float = 5) -> SimNode:
    return SimNode.from_template(
        template(cpu, mem_gi, 10, labels={ZONE_LABEL: zone}), (), name="template", group="asg"
    )


def test_ca_binpacking_zonal_max_skew_2_only_allows_2_pods() -> None:
    """cluster-autoscaler's TestBinpackingEstimate "zonal topology spreading with maxSkew=2 only
    allows 2 pods to schedule": an empty old node in zone jupiter, template in zone mars."""
    oldnode = SimNode.from_node(node("oldnode", 100, 100 / 1024, 10, zone="zone-jupiter"), ())
    pool = NodePool([oldnode], PredicateContext(topology=Topology(None)))
    pods = [
        pod(f"estimatee-{i}", 20, 100 / 2**30, namespace="universe", labels={"app": "estimatee"},
            scheduling=spread(skew=2, app="estimatee"))
        for i in range(8)
    ]  # fmt: skip
    result = estimate(group_pods(pods), _single_zone_base("zone-mars"), 100, pool.ctx)
    assert (result.node_count, len(result.placed)) == (1, 2)


def test_ca_binpacking_hostname_max_skew_2_forces_2_pods_per_node() -> None:
    oldnode = SimNode.from_node(node("oldnode", 100, 100 / 1024, 10, zone="zone-jupiter"), ())
    pool = NodePool([oldnode], PredicateContext(topology=Topology(None)))
    pods = [
        pod(f"estimatee-{i}", 200, 200 / 2**30, namespace="universe", labels={"app": "estimatee"},
            scheduling=spread(HOSTNAME_LABEL, skew=2, app="estimatee"))
        for i in range(8)
    ]  # fmt: skip
    result = estimate(group_pods(pods), _single_zone_base("zone-mars"), 100, pool.ctx)
    assert (result.node_count, len(result.placed)) == (4, 8)


def test_an_estimate_leaves_the_counts_as_it_found_them() -> None:
    pool = pool_of([("a1", A, [web("w0", "a1")]), ("b1", B, [])])
    before = where(pool, web("probe"))
    estimate(group_pods([web(f"n{i}") for i in range(3)]), _single_zone_base(B), 10, pool.ctx)
    assert where(pool, web("probe")) == before == "b1"
