"""Each predicate on a hand-built node: one case that fits, one that does not, and the reason."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.domain.model import (
    GPU,
    HOSTNAME_LABEL,
    ZONE_LABEL,
    ClusterState,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    Scheduling,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volumes,
)
from reconciler.planning import predicates as p
from reconciler.planning.predicates import PredicateContext, check, fits, unmodelled
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from tests.support.planning_factories import GI, node, pod, selector, sim, template

CTX = PredicateContext()


def test_resources_fit_and_reason_in_cores() -> None:
    n = sim(cpu=2000, mem_gi=4)
    n.add(pod("a", cpu=500, mem_gi=1))
    assert p.resources(pod("b", cpu=1500), n, CTX) is None
    assert p.resources(pod("b", cpu=2000), n, CTX) == "insufficient cpu: needs 2, free 1.5"
    assert p.resources(pod("b", cpu=100, mem_gi=4), n, CTX) == "insufficient memory: needs 4Gi, free 3Gi"


def test_extended_resources_absent_on_node_mean_zero() -> None:
    gpu_pod = pod("g", extra={GPU: 1})
    assert p.resources(gpu_pod, sim(), CTX) == "insufficient nvidia.com/gpu: needs 1, free 0"
    assert p.resources(gpu_pod, sim(extra={GPU: 1}), CTX) is None


def test_max_pods() -> None:
    n = sim(pods=1)
    assert p.max_pods(pod("a"), n, CTX) is None
    n.add(pod("a"))
    assert p.max_pods(pod("b"), n, CTX) == "too many pods: node allows 1"


def test_node_without_pod_capacity_takes_kubelet_default() -> None:
    from reconciler.domain.model import Node, Resources

    bare = Node("x", {}, (), Resources.of(cpu=1000), Resources.of(cpu=1000), True, None, False, "", None)
    assert SimNode.from_node(bare, ()).pods_free == 110


def test_cordoned_node_refuses_unless_tolerated() -> None:
    n = sim(unschedulable=True)
    assert p.cordoned(pod(), n, CTX) == "node is cordoned"
    tolerant = Scheduling(tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists"),))
    assert p.cordoned(pod(scheduling=tolerant), n, CTX) is None
    assert p.cordoned(pod(), sim(), CTX) is None


def test_node_selector() -> None:
    n = sim(labels={"pool": "web"})
    assert p.node_selector(pod(scheduling=Scheduling(node_selector=(("pool", "web"),))), n, CTX) is None
    bad = pod(scheduling=Scheduling(node_selector=(("pool", "db"),)))
    assert p.node_selector(bad, n, CTX) == "node selector doesn't match"


def test_required_node_affinity() -> None:
    n = sim(labels={"cores": "8"})
    term = NodeSelectorTerm(match_expressions=(SelectorRequirement("cores", "Gt", ("4",)),))
    assert p.node_affinity(pod(scheduling=Scheduling(required_node_affinity=(term,))), n, CTX) is None
    term = NodeSelectorTerm(match_expressions=(SelectorRequirement("cores", "Gt", ("8",)),))
    reason = p.node_affinity(pod(scheduling=Scheduling(required_node_affinity=(term,))), n, CTX)
    assert reason == "required node affinity doesn't match"


def test_taints() -> None:
    n = sim(taints=(Taint("dedicated", "gpu", "NoSchedule"), Taint("soft", "", "PreferNoSchedule")))
    assert p.taints(pod(), n, CTX) == "taint dedicated=gpu:NoSchedule not tolerated"
    ok = Scheduling(tolerations=(Toleration("dedicated", "Equal", "gpu", "NoSchedule"),))
    assert p.taints(pod(scheduling=ok), n, CTX) is None


def test_no_execute_taint_needs_toleration_too() -> None:
    n = sim(taints=(Taint("evict", "", "NoExecute"),))
    assert p.taints(pod(), n, CTX) == "taint evict:NoExecute not tolerated"


def test_host_ports() -> None:
    n = sim()
    n.add(pod("exporter", scheduling=Scheduling(host_ports=(HostPort(8080),))))
    same = pod("b", scheduling=Scheduling(host_ports=(HostPort(8080),)))
    assert p.host_ports(same, n, CTX) == "host port 8080/TCP in use"
    udp = pod("c", scheduling=Scheduling(host_ports=(HostPort(8080, "UDP"),)))
    assert p.host_ports(udp, n, CTX) is None
    other = pod("d", scheduling=Scheduling(host_ports=(HostPort(9090),)))
    assert p.host_ports(other, n, CTX) is None


def test_host_ports_on_distinct_addresses_do_not_conflict() -> None:
    n = sim()
    n.add(pod("a", scheduling=Scheduling(host_ports=(HostPort(53, "UDP", "10.0.0.1"),))))
    assert (
        p.host_ports(pod("b", scheduling=Scheduling(host_ports=(HostPort(53, "UDP", "10.0.0.2"),))), n, CTX)
        is None
    )
    wildcard = pod("c", scheduling=Scheduling(host_ports=(HostPort(53, "UDP"),)))
    assert p.host_ports(wildcard, n, CTX) == "host port 53/UDP in use"


def test_host_port_freed_when_pod_removed() -> None:
    n = sim()
    holder = pod("a", scheduling=Scheduling(host_ports=(HostPort(8080),)))
    n.add(holder)
    n.remove(holder)
    assert p.host_ports(pod("b", scheduling=Scheduling(host_ports=(HostPort(8080),))), n, CTX) is None


def _anti(app: str, key: str = HOSTNAME_LABEL, **kw: Any) -> Scheduling:
    return Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app=app), key, **kw),))


def test_anti_affinity_of_incoming_pod() -> None:
    n = sim()
    n.add(pod("x", labels={"app": "db"}, node_name="n1"))
    assert p.anti_affinity(pod("y", scheduling=_anti("db")), n, CTX) == (
        "anti-affinity with pod default/x on kubernetes.io/hostname"
    )
    assert p.anti_affinity(pod("y", scheduling=_anti("web")), n, CTX) is None


def test_anti_affinity_is_namespaced() -> None:
    n = sim()
    n.add(pod("x", namespace="other", labels={"app": "db"}))
    assert p.anti_affinity(pod("y", scheduling=_anti("db")), n, CTX) is None
    listed = _anti("db", namespaces=("other",))
    assert p.anti_affinity(pod("y", scheduling=listed), n, CTX) is not None
    everywhere = _anti("db", namespace_selector=LabelSelector())
    assert p.anti_affinity(pod("y", scheduling=everywhere), n, CTX) is not None


def test_anti_affinity_of_pods_already_on_the_node() -> None:
    n = sim()
    n.add(pod("x", labels={"app": "cache"}, scheduling=_anti("web")))
    assert p.anti_affinity(pod("y", labels={"app": "web"}), n, CTX) == (
        "anti-affinity of pod default/x on kubernetes.io/hostname"
    )
    assert p.anti_affinity(pod("y", labels={"app": "api"}), n, CTX) is None


def test_anti_affinity_term_removed_with_its_pod() -> None:
    n = sim()
    holder = pod("x", labels={"app": "cache"}, scheduling=_anti("web"))
    n.add(holder)
    n.remove(holder)
    assert p.anti_affinity(pod("y", labels={"app": "web"}), n, CTX) is None


def _spread(skew: int = 1, key: str = HOSTNAME_LABEL, when: str = "DoNotSchedule") -> Scheduling:
    return Scheduling(topology_spread=(TopologySpreadConstraint(skew, key, when, selector(app="web")),))


def test_topology_spread_on_hostname() -> None:
    n = sim()
    web = pod("w", labels={"app": "web"}, scheduling=_spread())
    assert p.topology_spread(web, n, CTX) is None
    n.add(pod("w0", labels={"app": "web"}))
    assert (
        p.topology_spread(web, n, CTX)
        == "topology spread on kubernetes.io/hostname: 2 matching pods > maxSkew 1"
    )
    assert p.topology_spread(pod("w", labels={"app": "web"}, scheduling=_spread(skew=2)), n, CTX) is None


def test_topology_spread_ignores_schedule_anyway_and_other_namespaces() -> None:
    n = sim()
    n.add(pod("w0", labels={"app": "web"}))
    soft = pod("w", labels={"app": "web"}, scheduling=_spread(when="ScheduleAnyway"))
    assert p.topology_spread(soft, n, CTX) is None
    elsewhere = pod("w", namespace="prod", labels={"app": "web"}, scheduling=_spread())
    assert p.topology_spread(elsewhere, n, CTX) is None


def test_volume_zones() -> None:
    ctx = PredicateContext({"default/data": ("us-east-1a",)})
    claimant = pod(volumes=Volumes(pvc_claims=("data",)))
    assert p.volume_zones(claimant, sim(zone="us-east-1a"), ctx) is None
    assert p.volume_zones(claimant, sim(zone="us-east-1b"), ctx) == "volume zone us-east-1a only"
    assert p.volume_zones(pod(volumes=Volumes(pvc_claims=("scratch",))), sim(zone="us-east-1b"), ctx) is None


def test_volume_zones_on_a_multi_zone_template_needs_every_zone_allowed() -> None:
    ctx = PredicateContext({"default/data": ("us-east-1a",)})
    claimant = pod(volumes=Volumes(pvc_claims=("data",)))
    multi = SimNode.from_template(template(), (), name="t", zones=("us-east-1a", "us-east-1b"))
    single = SimNode.from_template(template(), (), name="t", zones=("us-east-1a",))
    assert p.volume_zones(claimant, multi, ctx) == (
        "volume zone us-east-1a only; only us-east-1a would do, and AWS picks the zone of a new node"
    )
    assert p.volume_zones(claimant, single, ctx) is None


def test_selector_on_zone_of_multi_zone_template() -> None:
    multi = SimNode.from_template(template(), (), name="t", zones=("us-east-1a", "us-east-1b"))
    pinned = pod(scheduling=Scheduling(node_selector=((ZONE_LABEL, "us-east-1a"),)))
    assert p.node_selector(pinned, multi, CTX) == (
        "node selector doesn't match in zone us-east-1b; only us-east-1a would do, and AWS picks the zone "
        "of a new node"
    )
    term = NodeSelectorTerm(
        match_expressions=(SelectorRequirement(ZONE_LABEL, "In", ("us-east-1a", "us-east-1b")),)
    )
    either = pod(scheduling=Scheduling(required_node_affinity=(term,)))
    assert p.node_affinity(either, multi, CTX) is None


def test_check_reports_first_failure_in_reading_order() -> None:
    n = sim(cpu=100, taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    assert check(pod(cpu=1000), n) == "taint dedicated=gpu:NoSchedule not tolerated"
    assert check(pod(cpu=50), sim()) is None


def test_pvc_zones_from_state() -> None:
    state = ClusterState(
        nodes=(),
        pods=(),
        pvs=(
            PersistentVolume("pv-a", ("us-east-1a",), claim="default/data"),
            PersistentVolume("pv-any", ()),
            PersistentVolume("pv-b", ("us-east-1b",)),
        ),
        pvcs=(
            PersistentVolumeClaim("default", "logs", "pv-b"),
            PersistentVolumeClaim("default", "x", "pv-any"),
        ),
    )
    assert p.pvc_zones(state) == {"default/data": ("us-east-1a",), "default/logs": ("us-east-1b",)}


def test_format_amount() -> None:
    assert p.format_amount("cpu", 250) == "0.25"
    assert p.format_amount("cpu", 4000) == "4"
    assert p.format_amount("memory", 512 * 2**20) == "512Mi"
    assert p.format_amount("memory", 3 * GI // 2) == "1.5Gi"
    assert p.format_amount("pods", 3) == "3"


# ------------------------------------------------------------------------------------ unmodelled


def test_plain_pod_is_modelled() -> None:
    assert unmodelled(pod()) is None
    assert unmodelled(pod(scheduling=_anti("db"))) is None
    assert unmodelled(pod(scheduling=_spread())) is None
    assert unmodelled(pod(scheduling=_spread(key=ZONE_LABEL, when="ScheduleAnyway"))) is None


def test_unmodelled_constraints_are_named() -> None:
    affinity = Scheduling(pod_affinity=(PodAffinityTerm(selector(app="db"), HOSTNAME_LABEL),))
    assert (
        unmodelled(pod(scheduling=affinity))
        == "required pod affinity on kubernetes.io/hostname is not modelled"
    )
    assert unmodelled(pod(scheduling=_anti("db", key=ZONE_LABEL))) == (
        "required pod anti-affinity on topology.kubernetes.io/zone is not modelled"
    )
    assert unmodelled(pod(scheduling=_spread(key=ZONE_LABEL))) == (
        "topology spread on topology.kubernetes.io/zone (DoNotSchedule) is not modelled"
    )
    ns_sel = _anti("db", namespace_selector=selector(team="x"))
    assert (
        unmodelled(pod(scheduling=ns_sel))
        == "required pod anti-affinity with a namespace selector is not modelled"
    )


def test_with_a_topology_only_namespace_selectors_without_namespaces_stay_unmodelled() -> None:
    zone_anti = pod(scheduling=_anti("db", key=ZONE_LABEL))
    affinity = pod(scheduling=Scheduling(pod_affinity=(PodAffinityTerm(selector(app="db"), ZONE_LABEL),)))
    assert unmodelled(zone_anti, Topology(None)) is None
    assert unmodelled(affinity, Topology(None)) is None
    assert unmodelled(pod(scheduling=_spread(key=ZONE_LABEL)), Topology(None)) is None
    ns_sel = pod(scheduling=_anti("db", namespace_selector=selector(team="x")))
    assert unmodelled(ns_sel, Topology(None)) == (
        "required pod anti-affinity with a namespace selector is not modelled (namespaces were not read: "
        "include `kubectl get namespaces -o json` in a snapshot, or grant list on namespaces)"
    )
    assert unmodelled(ns_sel, Topology({"default": {"team": "x"}})) is None
    everywhere = pod(scheduling=_anti("db", namespace_selector=selector()))
    assert unmodelled(everywhere, Topology(None)) is None


# ------------------------------------------------------------------------------------ fits == check

_labels = st.sampled_from([{"app": "web"}, {"app": "db"}, {"app": "web", "tier": "x"}])
_sched = st.builds(
    Scheduling,
    node_selector=st.sampled_from([(), (("pool", "a"),)]),
    tolerations=st.sampled_from([(), (Toleration("dedicated", "Exists"),)]),
    host_ports=st.sampled_from([(), (HostPort(80),)]),
    pod_anti_affinity=st.sampled_from([(), (PodAffinityTerm(selector(app="web"), HOSTNAME_LABEL),)]),
    topology_spread=st.sampled_from(
        [(), (TopologySpreadConstraint(1, HOSTNAME_LABEL, "DoNotSchedule", selector(app="web")),)]
    ),
)
_pods = st.builds(
    lambda i, cpu, labels, s: pod(f"p{i}", cpu=cpu, labels=labels, scheduling=s),
    st.integers(0, 10**6),
    st.integers(0, 3000),
    _labels,
    _sched,
)


@settings(max_examples=150, deadline=None)
@given(
    placed=st.lists(_pods, max_size=5),
    incoming=_pods,
    pool=st.sampled_from([{}, {"pool": "a"}]),
    tainted=st.booleans(),
    cordon=st.booleans(),
)
def test_fits_agrees_with_check(
    placed: list[Pod], incoming: Pod, pool: dict[str, str], tainted: bool, cordon: bool
) -> None:
    taints = (Taint("dedicated", "x", "NoSchedule"),) if tainted else ()
    n = SimNode.from_node(node(cpu=4000, pods=4, labels=pool, taints=taints, unschedulable=cordon), placed)
    assert fits(incoming, n) == (check(incoming, n) is None)
