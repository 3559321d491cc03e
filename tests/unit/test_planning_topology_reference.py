"""Differential tests of the planner's domain-wide rules (topology spread, pod affinity and
anti-affinity) against tests/support/scheduler_reference.py, an independent model of the scheduler's
filters that counts every verdict from scratch. From the adversarial review of the planner-fidelity
work.

Random small clusters (zones, racks, hostnames, taints, namespaces, deleting pods) and pods with
random spread constraints (minDomains, node affinity / taints policies, matchLabelKeys) and affinity
terms (namespaces, namespace selectors, matchLabelKeys / mismatchLabelKeys):

- every placement NodePool.place makes passes the reference at the time;
- after random sequences of pool operations (place, remove, vacating atomic place then keep / undo /
  retire, estimates with trial nodes, upcoming nodes), Topology answers as the reference does over
  the pool's state, and as a fresh Topology built over the same final pool;
- every pod scale-down moves, and every pod a whole plan's scale-down moves, passes the reference in
  the final state (without the removed nodes, new nodes in their group's real zone).

Example counts are cut so the file runs in about 20 seconds; the adversarial review ran 1500-3000 of
each."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.domain.inventory import build_inventory
from reconciler.domain.model import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    LabelSelector,
    Node,
    NodeTemplate,
    Pod,
    PodAffinityTerm,
    Resources,
    Scheduling,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from reconciler.planning import plan as plan_mod
from reconciler.planning.equivalence import group_pods
from reconciler.planning.estimator import estimate
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import PredicateContext, node_check
from reconciler.planning.scale_down import ScaleDownResult, plan_scale_down
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from reconciler.planning.types import PlanInputs, PlannerMemory
from tests.support import scheduler_reference as ref
from tests.support.plan_world import NOW, World, make_config, template
from tests.support.planning_factories import pod, selector
from tests.support.scale_down_world import grp, n, run, world

NS = {"default": {"team": "x"}, "other": {"team": "y"}}
KEYS = (ZONE_LABEL, HOSTNAME_LABEL, "rack")
APPS = ("a", "b", "c")
ZONES = ("z1", "z2", "z3")
T0 = datetime(2024, 1, 1, tzinfo=UTC)
# CA's ToBeDeleted taint: a node being vacated is a pod-less ghost the scheduler will not use
GHOST = Taint("ToBeDeletedByClusterAutoscaler", "", "NoSchedule")

NodeSpec = tuple[str, dict[str, str], tuple[Taint, ...]]  # name, labels, taints
ClusterWorld = tuple[list[NodeSpec], list[Pod], list[Pod]]


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )


# ------------------------------------------------------------------------------ random worlds


@st.composite
def label_sel(draw: st.DrawFn) -> LabelSelector | None:
    kind = draw(st.sampled_from(["app", "app", "app", "none", "empty", "expr"]))
    if kind == "none":
        return None
    if kind == "empty":
        return LabelSelector()
    if kind == "expr":
        apps = tuple(sorted(draw(st.sets(st.sampled_from(APPS), min_size=1))))
        return LabelSelector((), (SelectorRequirement("app", "In", apps),))
    return selector(app=draw(st.sampled_from(APPS)))


@st.composite
def term(draw: st.DrawFn) -> PodAffinityTerm:
    ns = draw(st.sampled_from([(), (), ("default",), ("other",), ("default", "other")]))
    nsel = draw(st.sampled_from([None, None, None, LabelSelector(), selector(team="x")]))
    return PodAffinityTerm(
        draw(label_sel()),
        draw(st.sampled_from(KEYS)),
        ns,
        nsel,
        draw(st.sampled_from([(), (), ("ver",)])),
        draw(st.sampled_from([(), (), ("ver",)])),
    )


@st.composite
def constraint(draw: st.DrawFn) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        draw(st.integers(1, 2)),
        draw(st.sampled_from(KEYS)),
        draw(st.sampled_from(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"])),
        draw(label_sel()),
        draw(st.sampled_from([None, None, 1, 2, 3, 4])),
        draw(st.sampled_from(["Honor", "Ignore"])),
        draw(st.sampled_from(["Honor", "Ignore"])),
        draw(st.sampled_from([(), (), ("ver",), ("missing",)])),
    )


@st.composite
def scheduling(draw: st.DrawFn) -> Scheduling:
    kinds = draw(st.sets(st.sampled_from(["spread", "aff", "anti", "sel", "tol"]), max_size=3))
    return Scheduling(
        node_selector=(("pool", "x"),) if "sel" in kinds and draw(st.booleans()) else (),
        tolerations=(Toleration("t", "Exists"),) if "tol" in kinds else (),
        pod_affinity=tuple(draw(st.lists(term(), min_size=1, max_size=2))) if "aff" in kinds else (),
        pod_anti_affinity=tuple(draw(st.lists(term(), min_size=1, max_size=2))) if "anti" in kinds else (),
        topology_spread=(
            tuple(draw(st.lists(constraint(), min_size=1, max_size=2))) if "spread" in kinds else ()
        ),
    )


@st.composite
def a_pod(draw: st.DrawFn, name: str, node_name: str = "") -> Pod:
    labels = {"app": draw(st.sampled_from(APPS))}
    if draw(st.booleans()):
        labels["ver"] = draw(st.sampled_from(["1", "2"]))
    p = pod(
        name,
        draw(st.sampled_from([50, 200, 700])),
        0.01,
        namespace=draw(st.sampled_from(["default", "default", "default", "other"])),
        labels=labels,
        scheduling=draw(scheduling()),
        node_name=node_name,
        owner=name,
    )
    if node_name and draw(st.integers(0, 9)) == 0:
        p = p._replace(deleting_since=T0)
    return p


@st.composite
def cluster(draw: st.DrawFn) -> ClusterWorld:
    """[(name, labels, taints)], running pods, pending pods."""
    nodes = []
    for i in range(draw(st.integers(2, 6))):
        labels = {HOSTNAME_LABEL: f"n{i}"}
        if draw(st.integers(0, 5)):
            labels[ZONE_LABEL] = draw(st.sampled_from(ZONES))
        if draw(st.booleans()):
            labels["rack"] = draw(st.sampled_from(["r1", "r2"]))
        if draw(st.booleans()):
            labels["pool"] = "x"
        taints: tuple[Taint, ...] = (Taint("t", "v", "NoSchedule"),) if draw(st.integers(0, 4)) == 0 else ()
        nodes.append((f"n{i}", labels, taints))
    running = [draw(a_pod(f"r{j}", draw(st.sampled_from(nodes))[0])) for j in range(draw(st.integers(0, 8)))]
    pending = [draw(a_pod(f"p{j}")) for j in range(draw(st.integers(1, 6)))]
    return nodes, running, pending


def build(nodes: Sequence[NodeSpec], running: Sequence[Pod]) -> list[SimNode]:
    sims = []
    for name, labels, taints in nodes:
        alloc = Resources.of(cpu=2000, memory=2**34, pods=110)
        node = Node(name, labels, taints, alloc, alloc, True, None, False, f"aws:///z/i-{name}", None)
        sims.append(SimNode.from_node(node, [p for p in running if p.node_name == name]))
    return sims


def make_template(zone: str | None) -> NodeTemplate:
    alloc = Resources.of(cpu=2000, memory=2**34, pods=110)
    labels = {HOSTNAME_LABEL: "template-node", "rack": "r1", "pool": "x"}
    if zone is not None:
        labels[ZONE_LABEL] = zone
    return NodeTemplate("m5", labels, (), alloc, alloc, "t")


def live(pool: NodePool, name: str) -> bool:
    return not pool.is_retired(name) and name not in pool._vacated


def ref_nodes(pool: NodePool) -> list[ref.RNode]:
    """The pool as the scheduler sees it: retired nodes gone, vacated ones as pod-less ghosts."""
    out = []
    for s in pool.nodes:
        if pool.is_retired(s.name):
            continue
        r = ref.from_sim(s)
        if s.name in pool._vacated:
            r.pods = []
            r.taints = (*r.taints, GHOST)
        out.append(r)
    return out


def fresh_of(pool: NodePool) -> Topology:
    topo = Topology(NS)
    for s in pool.nodes:
        if not pool.is_retired(s.name):
            topo.node_added(s)
    for s in pool.nodes:
        if s.name in pool._vacated and not pool.is_retired(s.name):
            topo.node_vacated(s)
    return topo


# ------------------------------------------------------------------------------ placement


@fuzz(230)
@given(cluster())
def test_every_placement_passes_the_reference(world_: ClusterWorld) -> None:
    nodes, running, pending = world_
    sims = build(nodes, running)
    pool = NodePool(sims, PredicateContext(topology=Topology(NS)))
    rnodes = [ref.RNode(s.name, dict(s.labels), tuple(s.taints), list(s.pods)) for s in sims]
    by = {r.name: r for r in rnodes}
    for p in pending:
        pool.fits_somewhere(p)  # a probe first, as scale-up makes: it may move the class's cursor
        placed = pool.place([p])
        if placed.placed:
            _, name = placed.placed[0]
            why = ref.reason(p, by[name], rnodes, NS)
            assert why is None, (p.name, p.scheduling, name, why)
            by[name].pods.append(p)


# ------------------------------------------------------------------------------ pool operations


def _estimate(
    pool: NodePool,
    data: st.DataObject,
    pending: list[Pod],
    placed: list[tuple[Pod, str]],
    base: SimNode,
    prefix: str,
) -> None:
    """Estimate a few not yet placed pods on new nodes like `base`; maybe add those nodes."""
    chosen = data.draw(st.lists(st.sampled_from(pending), max_size=4, unique_by=id))
    chosen = [p for p in chosen if not any(q is p for q, _ in placed)]
    est = estimate(group_pods(chosen, pool.classifier), base, 3, pool.ctx, name_prefix=prefix)
    if data.draw(st.booleans()):
        for s in est.nodes:
            pool.add_node(s)
        placed.extend(est.placements)


def _vacate(
    pool: NodePool, data: st.DataObject, placed: list[tuple[Pod, str]], history: list[str]
) -> list[tuple[Pod, str]]:
    """Move a live node's pods off it (atomic, vacating), then keep, undo or retire."""
    names = [s.name for s in pool.nodes if live(pool, s.name)]
    if not names:
        return placed
    name = data.draw(st.sampled_from(names))
    sim = pool.get(name)
    assert sim is not None
    movers = [q for q in sim.pods if not q.is_daemonset]
    res = pool.place(movers, exclude={name}, atomic=True, vacating=name)
    then = data.draw(st.sampled_from(["keep", "undo", "retire"]))
    history.append(then)
    if res.complete:
        if then == "undo":
            pool.undo(res)
        elif then == "retire":
            pool.retire(name)
            placed = [(q, at) for q, at in placed if at != name]
            placed.extend(res.placed)
        else:
            placed.extend(res.placed)
    return placed


def _book_or_free(
    op: str,
    pool: NodePool,
    data: st.DataObject,
    pending: list[Pod],
    placed: list[tuple[Pod, str]],
    history: list[str],
) -> list[tuple[Pod, str]]:
    """One pool operation of the operation fuzzers: place a pending pod, take one back, or vacate a node."""
    if op == "place":
        p = data.draw(st.sampled_from(pending))
        if not any(q is p for q, _ in placed):
            placed.extend(pool.place([p]).placed)
    elif op == "remove" and placed:
        i = data.draw(st.integers(0, len(placed) - 1))
        p, name = placed[i]
        if not pool.is_retired(name):
            placed.pop(i)
            pool.remove_pod(p, name)
    elif op == "vacate":
        placed = _vacate(pool, data, placed, history)
    return placed


@fuzz(190)
@given(cluster(), st.data())
def test_pool_operations_keep_topology_equal_to_the_reference(
    world_: ClusterWorld, data: st.DataObject
) -> None:
    """After every step, Topology's verdict for every probe pod on every live node it passes
    otherwise equals the reference's over the pool's current state: catches incremental drift."""
    nodes, running, pending = world_
    pool = NodePool(build(nodes, running), PredicateContext(topology=Topology(NS)))
    topo = pool.ctx.topology
    assert topo is not None
    placed: list[tuple[Pod, str]] = []
    history: list[str] = []
    upcoming = 0
    for step in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["place", "remove", "vacate", "estimate", "add", "place"]))
        history.append(op)
        if op in ("place", "remove", "vacate"):
            placed = _book_or_free(op, pool, data, pending, placed, history)
        elif op == "estimate":
            zone = data.draw(st.sampled_from(ZONES))
            base = SimNode.from_template(make_template(zone), (), name="tmpl", zones=(zone,), group="g")
            _estimate(pool, data, pending, placed, base, f"e{step}")
        elif op == "add":
            zone = data.draw(st.sampled_from(ZONES))
            upcoming += 1
            base = SimNode.from_template(
                make_template(zone), (), name=f"up{upcoming}", zones=(zone,), group="g"
            )
            pool.add_node(base)
        rnodes = ref_nodes(pool)
        by = {r.name: r for r in rnodes}
        for p in pending:
            for s in pool.nodes:
                if not live(pool, s.name) or node_check(p, s, pool.ctx) is not None:
                    continue
                mine, theirs = topo.check(p, s), ref.reason(p, by[s.name], rnodes, NS)
                assert (mine is None) == (theirs is None), (history, p.name, s.name, mine, theirs)


@fuzz(190)
@given(cluster(), st.data())
def test_incremental_topology_equals_a_fresh_one(world_: ClusterWorld, data: st.DataObject) -> None:
    """Same operations, also multi-AZ new nodes (which the reference does not model): the incremental
    Topology answers exactly as one built afresh over the same pool (live nodes, vacated ghosts)."""
    nodes, running, pending = world_
    pool = NodePool(build(nodes, running), PredicateContext(topology=Topology(NS)))
    topo = pool.ctx.topology
    assert topo is not None
    # touch the probes first so counters exist early and live through the operations
    for p in pending:
        for s in pool.nodes:
            topo.check(p, s)
    placed: list[tuple[Pod, str]] = []
    history: list[str] = []
    for step in range(1, data.draw(st.integers(1, 10)) + 1):
        op = data.draw(st.sampled_from(["place", "remove", "vacate", "estimate", "add"]))
        history.append(op)
        if op in ("place", "remove", "vacate"):
            placed = _book_or_free(op, pool, data, pending, placed, history)
        elif op in ("estimate", "add"):
            zones = tuple(data.draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True)))
            base = SimNode.from_template(make_template(None), (), name=f"b{step}", zones=zones, group="g")
            if op == "add":
                pool.add_node(base)
            else:
                _estimate(pool, data, pending, placed, base, f"e{step}")
        fresh = fresh_of(pool)
        for p in pending:
            for s in pool.nodes:
                if not live(pool, s.name):
                    continue
                mine, theirs = topo.check(p, s), fresh.check(p, s)
                assert (mine is None) == (theirs is None), (history, p.name, s.name, mine, theirs)


# ------------------------------------------------------------------------------ scale-down and plans


@fuzz(190)
@given(cluster())
def test_scale_down_moves_pass_the_reference(world_: ClusterWorld) -> None:
    """Every pod a removal moved passes the reference where it ended, without the removed nodes."""
    nodes, running, _ = world_
    made = [
        dataclasses.replace(n(name, taints=taints), labels=dict(labels)) for name, labels, taints in nodes
    ]
    inv = world([grp("asg", made)], running)
    sims = [
        SimNode.from_node(x, inv.pods_by_node.get(x.name, ()), group="asg")
        for x in sorted(made, key=lambda x: x.name)
    ]
    result, pool = run(inv, pool=NodePool(sims, PredicateContext(topology=Topology(NS))))
    final: dict[int, tuple[Pod, str]] = {}
    for moves in result.moves.values():
        for moved, dest in moves:
            final[id(moved)] = (moved, dest)
    stay = [s for s in pool.nodes if not pool.is_retired(s.name)]
    for moved, dest in final.values():
        why = ref.final_check(stay, moved, dest, NS)
        assert why is None, (moved.name, moved.scheduling, dest, why, sorted(result.moves))


@st.composite
def plan_worlds(draw: st.DrawFn) -> World:
    """Single-AZ groups (some similar), nodes, running pods, pending pods."""
    w = World()
    groups = []
    for i in range(draw(st.integers(1, 4))):
        zone = draw(st.sampled_from(ZONES))
        name = f"g{i}"
        labels = {"rack": draw(st.sampled_from(["r1", "r2"])), "pool": "x"}
        w.group(
            name,
            zones=(zone,),
            max_size=draw(st.integers(1, 6)),
            tmpl=template("m5.large", cpu=2000, mem_gi=8, labels=labels),
        )
        groups.append((name, zone, labels))
    names = []
    for j in range(draw(st.integers(0, 5))):
        g, zone, labels = draw(st.sampled_from(groups))
        if len([x for x in w.nodes if x.labels.get("grp") == g]) + 1 > w.groups[g].max_size:
            continue
        name = f"n{j}"
        w.node(g, name, cpu=2000, mem_gi=8, labels={**labels, "grp": g, ZONE_LABEL: zone})
        names.append(name)
    for k in range(draw(st.integers(0, 8))):
        if not names:
            break
        p = draw(a_pod(f"r{k}", draw(st.sampled_from(names))))
        w.pods.append(p._replace(created=NOW - timedelta(hours=1), phase="Running"))
    for k in range(draw(st.integers(1, 6))):
        p = draw(a_pod(f"p{k}"))
        w.pods.append(
            p._replace(
                created=NOW - timedelta(hours=1), scheduled_status="False", scheduled_reason="Unschedulable"
            )
        )
    return w


@fuzz(160)
@given(plan_worlds(), st.booleans(), st.booleans())
def test_plan_final_state_passes_the_reference(w: World, balance: bool, down: bool) -> None:
    """After make_plan (balancing on or off, scale-down on or off), every pod scale-down moved passes
    the reference in the final pool: the nodes that stay and the new nodes, each in its owner group's
    real zone. (Pending pods are not judged on the final state: that is too strict for them, since
    pods placed later without constraints of their own may join their domains, as the scheduler
    would let them.)"""
    captured: dict[str, Any] = {}

    def spy(inputs: PlanInputs, pool: NodePool, **kw: Any) -> ScaleDownResult:
        captured["pool"] = pool
        result = plan_scale_down(inputs, pool, **kw)
        captured["moves"] = result.moves
        return result

    class SpyPool(NodePool):
        __slots__ = ()

        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            captured["pool"] = self

    state = dataclasses.replace(w.state(), namespaces=NS)
    inv = build_inventory(state, tuple(w.groups.values()))
    memory = PlannerMemory(unneeded_since={x.name: NOW - timedelta(hours=2) for x in w.nodes})
    config = make_config(scale_up={"balance_similar_node_groups": balance}, scale_down={"enabled": down})
    with (
        mock.patch.object(plan_mod, "plan_scale_down", spy),
        mock.patch.object(plan_mod, "NodePool", SpyPool),
    ):
        plan = plan_mod.make_plan(
            PlanInputs(inventory=inv, config=config, now=NOW, committed={}, memory=memory)
        )
    pool: NodePool = captured["pool"]
    zone_of = {name: g.zones[0] for name, g in w.groups.items()}
    rnodes = []
    for s in pool.nodes:
        if pool.is_retired(s.name):
            continue
        r = ref.from_sim(s)
        if s.is_new:
            r.labels = {**r.labels, ZONE_LABEL: zone_of[s.group]}  # where AWS really puts it
        rnodes.append(r)
    by = {r.name: r for r in rnodes}
    for moves in captured.get("moves", {}).values():
        for p, dest in moves:
            if dest not in by:
                continue
            target = by[dest]
            saved = target.pods
            target.pods = [q for q in saved if q is not p]
            why = ref.reason(p, target, rnodes, NS)
            target.pods = saved
            assert why is None, (
                p.name,
                p.scheduling,
                dest,
                why,
                {g.name: (g.new_nodes, g.removals) for g in plan.groups},
            )
