"""First-fit decreasing onto new template nodes: node counts on known examples, DaemonSet overhead,
caps, unfit reasons, and two properties (placed pods really fit; same input, same output)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.domain.model import (
    HOSTNAME_LABEL,
    DaemonSet,
    Pod,
    PodAffinityTerm,
    Resources,
    Scheduling,
    Taint,
)
from reconciler.planning.equivalence import Classifier, ClassKey, group_pods
from reconciler.planning.estimator import estimate, size_key
from reconciler.planning.predicates import check
from reconciler.planning.simnode import SimNode
from tests.support.planning_factories import pod, selector, template


def base(
    cpu: int = 4000, mem_gi: float = 16, pods: int = 110, daemonsets: tuple[DaemonSet, ...] = (), **kw: Any
) -> SimNode:
    return SimNode.from_template(template(cpu, mem_gi, pods, **kw), daemonsets, name="tmpl", group="asg")


def test_ffd_packs_known_example() -> None:
    # 4-core nodes; pods 3,3,2,2,1,1 cores: FFD gives [3,1] [3,1] [2,2] = 3 nodes.
    pods = [pod(f"p{i}", cpu=c * 1000, owner=f"o{c}") for i, c in enumerate([1, 2, 3, 1, 2, 3])]
    result = estimate(group_pods(pods), base(), 10)
    assert result.node_count == 3
    assert len(result.placed) == 6 and not result.capped and not result.unfit
    loads = sorted(sorted(p.requests.cpu for p in n.pods) for n in result.nodes)
    assert loads == [[1000, 3000], [1000, 3000], [2000, 2000]]


def test_ffd_beats_input_order() -> None:
    # In input order first-fit would need 3 nodes (1,1 | 3 | 3 ... ); decreasing needs 2.
    pods = [pod(f"s{i}", cpu=1000, owner="small") for i in range(2)] + [
        pod(f"b{i}", cpu=3000, owner="big") for i in range(2)
    ]
    assert estimate(group_pods(pods), base(), 10).node_count == 2


def test_memory_and_max_pods_bound_too() -> None:
    mem_bound = [pod(f"m{i}", cpu=10, mem_gi=6, owner="m") for i in range(5)]
    assert estimate(group_pods(mem_bound), base(mem_gi=16), 10).node_count == 3  # 2 per node
    tiny = [pod(f"t{i}", cpu=1, mem_gi=0, owner="t") for i in range(25)]
    assert estimate(group_pods(tiny), base(pods=10), 10).node_count == 3


def test_pods_without_requests_are_bound_by_pod_slots() -> None:
    agent = (DaemonSet("kube-system", "agent", Resources.of(cpu=3500)),)
    free = [pod(f"f{i}", cpu=0, mem_gi=0, owner="f") for i in range(7)]
    result = estimate(group_pods(free), base(pods=4, daemonsets=agent), 10)
    assert result.node_count == 3  # 3 slots left per node after the DaemonSet pod
    assert not result.unfit


def test_a_daemonset_that_cannot_fit_a_new_node_takes_nothing_there() -> None:
    """Its pod goes through kube-scheduler and stays Pending on a node too small for it; counted,
    it would fill every new node (a tenant's `memory: 1e33` DaemonSet stopped every scale-up: until
    issue 28 this test said the hog took a pod slot and all the room)."""
    hog = (DaemonSet("tenant", "hog", Resources.of(cpu=5000)),)  # more than the 4-core template
    huge = (DaemonSet("tenant", "huge", Resources.of(memory=2**63 - 1)),)
    free = [pod(f"f{i}", cpu=0, mem_gi=0, owner="f") for i in range(7)]
    assert estimate(group_pods(free), base(pods=4, daemonsets=hog + huge), 10).node_count == 2
    work = [pod(f"w{i}", cpu=2000, owner="w") for i in range(4)]
    assert estimate(group_pods(work), base(daemonsets=hog + huge), 10).node_count == 2


def test_daemonset_overhead_reduces_room() -> None:
    ds = (DaemonSet("kube-system", "agent", Resources.of(cpu=500)),)
    pods = [pod(f"p{i}", cpu=2000, owner="w") for i in range(4)]
    assert estimate(group_pods(pods), base(), 10).node_count == 2
    result = estimate(group_pods(pods), base(daemonsets=ds), 10)
    assert result.node_count == 4  # 3.5 cores left per node: one 2-core pod each
    assert all(any(p.owner and p.owner.kind == "DaemonSet" for p in n.pods) for n in result.nodes)


def test_cap_on_new_nodes() -> None:
    pods = [pod(f"p{i}", cpu=3000, owner="w") for i in range(5)]
    result = estimate(group_pods(pods), base(), 2)
    assert result.node_count == 2
    assert len(result.placed) == 2 and len(result.capped) == 3
    none = estimate(group_pods(pods), base(), 0)
    assert none.node_count == 0 and len(none.capped) == 5 and not none.helped


def test_unfit_pods_get_the_template_reason() -> None:
    huge = pod("huge", cpu=64000, owner="huge")
    tainted = base(taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    result = estimate(group_pods([huge, pod("ok", owner="ok")]), base(), 5)
    assert result.unfit == ((huge, "insufficient cpu: needs 64, free 4"),)
    assert result.node_count == 1
    all_unfit = estimate(group_pods([pod("ok", owner="ok")]), tainted, 5)
    assert all_unfit.unfit[0][1] == "taint dedicated=gpu:NoSchedule not tolerated"
    assert all_unfit.node_count == 0


def test_self_anti_affinity_puts_one_pod_per_node() -> None:
    anti = Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app="zk"), HOSTNAME_LABEL),))
    pods = [pod(f"zk-{i}", cpu=100, owner="zk", labels={"app": "zk"}, scheduling=anti) for i in range(3)]
    result = estimate(group_pods(pods), base(), 10)
    assert result.node_count == 3


def test_new_node_names_and_base_untouched() -> None:
    b = base()
    result = estimate(
        group_pods([pod(f"p{i}", cpu=3000, owner="w") for i in range(2)]), b, 5, name_prefix="asg-r1"
    )
    assert [n.name for n in result.nodes] == ["asg-r1-1", "asg-r1-2"]
    assert b.cpu_free == 4000 and not b.pods
    assert result.placements[0] == (result.placed[0], "asg-r1-1")


_pod_specs = st.lists(
    st.tuples(st.integers(1, 4500), st.integers(0, 20), st.sampled_from(["a", "b", "c"]), st.booleans()),
    max_size=40,
)


def _pods_from(specs: list[tuple[int, int, str, bool]]) -> list[Pod]:
    anti = Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app="solo"), HOSTNAME_LABEL),))
    out = []
    for i, (cpu, mem_eighths, owner, solo) in enumerate(specs):
        out.append(
            pod(
                f"p{i}",
                cpu=cpu,
                mem_gi=mem_eighths / 8,
                owner=owner + ("-solo" if solo else ""),
                labels={"app": "solo" if solo else owner},
                scheduling=anti if solo else Scheduling(),
            )
        )
    return out


@settings(max_examples=120, deadline=None)
@given(specs=_pod_specs, cap=st.integers(0, 12))
def test_every_placed_pod_fits_and_accounting_adds_up(
    specs: list[tuple[int, int, str, bool]], cap: int
) -> None:
    pods = _pods_from(specs)
    b = base(cpu=4000, mem_gi=2, pods=8)
    result = estimate(group_pods(pods), b, cap)
    assert result.node_count <= cap
    assert len(result.placed) + len(result.capped) + len(result.unfit) == len(pods)
    # Replay every placement on a fresh copy of the template: each pod must pass every predicate.
    replay = {n.name: b.copy(n.name) for n in result.nodes}
    for p, name in result.placements:
        assert check(p, replay[name]) is None
        replay[name].add(p)
    for n in result.nodes:
        assert n.cpu_free >= 0 and n.mem_free >= 0 and n.pods_free >= 0
        assert n.pods  # no empty node is ever opened


def test_fit_memo_is_filled_and_reused() -> None:
    classifier = Classifier()
    huge, ok = pod("huge", cpu=64000, owner="huge"), pod("ok", owner="ok")
    classes = group_pods([huge, ok], classifier)
    memo: dict[ClassKey, str | None] = {}
    first = estimate(classes, base(), 5, fit_memo=memo)
    assert memo == {classes[0].key: "insufficient cpu: needs 64, free 4", classes[1].key: None}
    memo[classes[1].key] = "stale verdict"  # proves the memo is read, not recomputed
    second = estimate(classes, base(), 5, fit_memo=memo)
    assert first.unfit == ((huge, "insufficient cpu: needs 64, free 4"),)
    assert second.unfit[-1] == (ok, "stale verdict")


def _naive_ffd(pods: list[Pod], b: SimNode, cap: int) -> list[tuple[Pod, str]]:
    """Textbook FFD, one pod at a time, every opened node checked with `check`."""
    classes = group_pods(pods)
    fitting = [(c, cls) for c, cls in enumerate(classes) if check(cls.representative, b) is None]
    order = sorted(
        ((size_key(p, b), c, i, p) for c, cls in fitting for i, p in enumerate(cls.pods)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    nodes: list[SimNode] = []
    out: list[tuple[Pod, str]] = []
    for _, _, _, p in order:
        target = next((n for n in nodes if check(p, n) is None), None)
        if target is None:
            if len(nodes) >= cap:
                continue
            target = b.copy(f"new-asg-{len(nodes) + 1}")
            nodes.append(target)
        target.add(p)
        out.append((p, target.name))
    return out


@settings(max_examples=150, deadline=None)
@given(specs=_pod_specs, cap=st.integers(0, 12))
def test_matches_textbook_ffd(specs: list[tuple[int, int, str, bool]], cap: int) -> None:
    pods = _pods_from(specs)
    b = base(cpu=4000, mem_gi=2, pods=8)
    assert list(estimate(group_pods(pods), b, cap).placements) == _naive_ffd(pods, b, cap)


@settings(max_examples=60, deadline=None)
@given(specs=_pod_specs, cap=st.integers(0, 12))
def test_same_input_same_result(specs: list[tuple[int, int, str, bool]], cap: int) -> None:
    pods = _pods_from(specs)
    first = estimate(group_pods(pods), base(), cap)
    second = estimate(group_pods(list(pods)), base(), cap)
    assert first.placements == second.placements
    assert first.capped == second.capped and first.unfit == second.unfit
