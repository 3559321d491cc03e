"""SimNode bookkeeping: built from a node or a template, DaemonSet overhead, add/remove, copies."""

from __future__ import annotations

from reconciler.domain.model import (
    CPU,
    HOSTNAME_LABEL,
    LEGACY_ZONE_LABEL,
    MEMORY,
    PODS,
    ZONE_LABEL,
    DaemonSet,
    HostPort,
    NodeSelectorTerm,
    Resources,
    Scheduling,
    SelectorRequirement,
    Taint,
    Toleration,
)
from reconciler.planning.predicates import check
from reconciler.planning.simnode import SimNode
from tests.support.planning_factories import GI, node, pod, template


def test_from_node_books_running_pods_and_skips_terminal_ones() -> None:
    done = pod("done", cpu=1000, node_name="n1")._replace(phase="Succeeded")
    sim = SimNode.from_node(
        node(cpu=4000, mem_gi=16, pods=10), [pod("a", cpu=1500, mem_gi=2, node_name="n1"), done]
    )
    assert (sim.cpu_free, sim.mem_free, sim.pods_free) == (2500, 14 * GI, 9)
    assert sim.requested_cpu == 1500 and sim.requested_memory == 2 * GI
    assert sim.zones == ("us-east-1a",)
    assert sim.free_resources() == Resources({CPU: 2500, MEMORY: 14 * GI, PODS: 9})


def test_add_then_remove_restores_everything() -> None:
    sim = SimNode.from_node(node(extra={"example.com/dongle": 2}), [])
    before = (
        sim.cpu_free,
        sim.mem_free,
        sim.pods_free,
        dict(sim.free),
        dict(sim.ports),
        list(sim.anti_terms),
    )
    p = pod("a", cpu=700, extra={"example.com/dongle": 1}, scheduling=Scheduling(host_ports=(HostPort(80),)))
    sim.add(p)
    assert sim.free["example.com/dongle"] == 1 and (("TCP", 80) in sim.ports)
    sim.remove(p)
    assert (
        sim.cpu_free,
        sim.mem_free,
        sim.pods_free,
        dict(sim.free),
        dict(sim.ports),
        list(sim.anti_terms),
    ) == before


NODE_EXPORTER = DaemonSet(
    "monitoring",
    "node-exporter",
    Resources.of(cpu=100, memory=128 * 2**20),
    Scheduling(tolerations=(Toleration(operator="Exists"),), host_ports=(HostPort(9100),)),
)
KUBE_PROXY = DaemonSet("kube-system", "kube-proxy", Resources.of(cpu=100))
GPU_PLUGIN = DaemonSet(
    "kube-system",
    "nvidia",
    Resources.of(cpu=50),
    Scheduling(node_selector=(("accelerator", "nvidia"),)),
)


def test_template_node_runs_matching_daemonsets() -> None:
    tmpl = template(cpu=2000, mem_gi=8, pods=20, taints=(Taint("dedicated", "batch", "NoSchedule"),))
    sim = SimNode.from_template(tmpl, [NODE_EXPORTER, KUBE_PROXY, GPU_PLUGIN], name="new-1", group="asg")
    # node-exporter tolerates everything; kube-proxy does not tolerate the taint; no GPU label.
    assert [p.owner.name for p in sim.pods if p.owner] == ["node-exporter"]
    assert sim.cpu_free == 1900 and sim.pods_free == 19
    assert check(
        pod(
            scheduling=Scheduling(host_ports=(HostPort(9100),), tolerations=(Toleration(operator="Exists"),))
        ),
        sim,
    ) == ("host port 9100/TCP in use")


def test_daemonset_tolerates_unschedulable_and_not_ready_like_the_controller() -> None:
    tmpl = template(taints=(Taint("node.kubernetes.io/not-ready", "", "NoExecute"),))
    sim = SimNode.from_template(tmpl, [KUBE_PROXY], name="new-1")
    assert len(sim.pods) == 1


def test_daemonset_node_affinity_on_template_labels() -> None:
    term = NodeSelectorTerm(match_expressions=(SelectorRequirement("kubernetes.io/arch", "In", ("arm64",)),))
    arm_only = DaemonSet(
        "kube-system", "arm", Resources.of(cpu=10), Scheduling(required_node_affinity=(term,))
    )
    amd = SimNode.from_template(template(labels={"kubernetes.io/arch": "amd64"}), [arm_only], name="a")
    arm = SimNode.from_template(template(labels={"kubernetes.io/arch": "arm64"}), [arm_only], name="b")
    assert (len(amd.pods), len(arm.pods)) == (0, 1)


def test_template_gets_fresh_hostname_and_zone_labels() -> None:
    tmpl = template(
        labels={HOSTNAME_LABEL: "ip-10-0-0-1", LEGACY_ZONE_LABEL: "us-east-1c", ZONE_LABEL: "us-east-1c"}
    )
    one = SimNode.from_template(tmpl, [], name="new-1", zones=("us-east-1a",))
    assert one.labels[HOSTNAME_LABEL] == "new-1"
    assert one.labels[ZONE_LABEL] == one.labels[LEGACY_ZONE_LABEL] == "us-east-1a"
    assert one.zones == ("us-east-1a",) and one.is_new
    multi = SimNode.from_template(tmpl, [], name="new-2", zones=("us-east-1a", "us-east-1b"))
    assert ZONE_LABEL not in multi.labels
    assert [v[ZONE_LABEL] for v in multi.label_variants] == ["us-east-1a", "us-east-1b"]


def test_template_zone_defaults_to_its_label() -> None:
    sim = SimNode.from_template(template(labels={ZONE_LABEL: "us-east-1b"}), [], name="n")
    assert sim.zones == ("us-east-1b",)


def test_copy_is_independent_and_keeps_the_placeholder_hostname() -> None:
    base = SimNode.from_template(template(), [KUBE_PROXY], name="base", zones=("a", "b"))
    twin = base.copy("new-7")
    twin.add(pod("x", cpu=1000, scheduling=Scheduling(host_ports=(HostPort(80),))))
    assert base.cpu_free == 3900 and twin.cpu_free == 2900
    assert not base.ports and len(base.pods) == 1
    assert twin.name == "new-7"
    assert twin.labels[HOSTNAME_LABEL] == base.labels[HOSTNAME_LABEL] == "base"


def test_add_same_books_a_run_of_identical_pods() -> None:
    one, many = SimNode.from_node(node(), []), SimNode.from_node(node(), [])
    pods = [pod(f"p{i}", cpu=300, mem_gi=1, extra={"example.com/x": 1}) for i in range(4)]
    for p in pods:
        one.add(p)
    many.add_same(pods)
    assert (many.cpu_free, many.mem_free, many.pods_free, many.free, many.pods) == (
        one.cpu_free,
        one.mem_free,
        one.pods_free,
        one.free,
        one.pods,
    )


def test_add_same_falls_back_for_pods_that_need_bookkeeping() -> None:
    sim = SimNode.from_node(node(), [])
    ported = [pod(f"p{i}", scheduling=Scheduling(host_ports=(HostPort(80 + i),))) for i in range(2)]
    sim.add_same(ported)
    assert set(sim.ports) == {("TCP", 80), ("TCP", 81)}
