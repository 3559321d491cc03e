"""First-fit onto existing and upcoming nodes (NodePool): order, exclusions, retirement, atomic
all-or-nothing, and a model-based property: with its cursors the pool picks exactly the node a naive
first-fit scan would pick, whatever sequence of placements and removals came before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.domain.model import HOSTNAME_LABEL, Pod, PodAffinityTerm, Scheduling, TopologySpreadConstraint
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import check
from reconciler.planning.simnode import SimNode
from tests.support.planning_factories import pod, selector, sim


def pool_of(*cpus: int) -> NodePool:
    return NodePool(sim(f"n{i}", cpu=c) for i, c in enumerate(cpus))


def test_first_fit_in_pool_order() -> None:
    pool = pool_of(1000, 4000, 4000)
    result = pool.place([pod("a", cpu=2000), pod("b", cpu=500), pod("c", cpu=2000)])
    assert result.placed == (
        (result.placed[0][0], "n1"),
        (result.placed[1][0], "n0"),
        (result.placed[2][0], "n1"),
    )
    assert result.complete


def test_unplaced_pods_are_reported() -> None:
    pool = pool_of(1000)
    big = pod("big", cpu=2000)
    result = pool.place([big, pod("small", cpu=500)])
    assert result.unplaced == (big,)
    assert [name for _, name in result.placed] == ["n0"]


def test_exclude_and_retire() -> None:
    pool = pool_of(4000, 4000, 4000)
    assert pool.place([pod("a")], exclude={"n0"}).placed[0][1] == "n1"
    pool.retire("n1")
    assert pool.is_retired("n1")
    assert pool.place([pod("b")], exclude={"n0"}).placed[0][1] == "n2"
    assert pool.fits_somewhere(pod("c"), exclude={"n0", "n2"}) is None
    assert pool.fits_somewhere(pod("c")) == "n0"


def test_atomic_failure_takes_everything_back() -> None:
    pool = pool_of(2000, 2000)
    before = [(n.cpu_free, len(n.pods)) for n in pool.nodes]
    pods = [pod("a", cpu=1500), pod("b", cpu=1500), pod("c", cpu=1500)]
    result = pool.place(pods, atomic=True)
    assert result.placed == () and result.unplaced == (pods[2],)
    assert [(n.cpu_free, len(n.pods)) for n in pool.nodes] == before
    # and the pool still places correctly afterwards
    assert [name for _, name in pool.place(pods[:2]).placed] == ["n0", "n1"]


def test_atomic_failure_does_not_leave_cursors_past_freed_room() -> None:
    pool = pool_of(2000)
    pods = [pod("a", cpu=1500, owner="w"), pod("b", cpu=1500, owner="w")]
    assert not pool.place(pods, atomic=True).complete  # b was refused by n0 only because a was there
    assert pool.fits_somewhere(pod("c", cpu=1500, owner="w")) == "n0"


def test_removal_makes_a_refused_node_usable_again() -> None:
    pool = pool_of(2000, 2000)
    holder = pod("holder", cpu=2000, owner="h")
    pool.add_pod(holder, "n0")
    assert pool.place([pod("a", cpu=1500, owner="w")]).placed[0][1] == "n1"  # cursor passes n0
    pool.remove_pod(holder, "n0")
    assert pool.place([pod("b", cpu=1500, owner="w")]).placed[0][1] == "n0"


def test_undo_returns_pods() -> None:
    pool = pool_of(2000)
    placement = pool.place([pod("a", cpu=1500, owner="w")])
    assert pool.fits_somewhere(pod("b", cpu=1500, owner="w")) is None
    pool.undo(placement)
    assert pool.fits_somewhere(pod("b", cpu=1500, owner="w")) == "n0"


def test_upcoming_nodes_are_appended() -> None:
    pool = pool_of(1000)
    assert pool.place([pod("a", cpu=2000, owner="w")]).unplaced
    pool.add_node(sim("upcoming", cpu=4000))
    assert "upcoming" in pool and len(pool) == 2
    assert pool.place([pod("b", cpu=2000, owner="w")]).placed[0][1] == "upcoming"
    assert pool.get("upcoming") is not None and pool.get("nope") is None


def test_pod_without_requests_fits_an_overcommitted_node() -> None:
    pool = pool_of(1000)
    pool.add_pod(pod("hog", cpu=1500, node_name="n0"), "n0")
    assert pool.place([pod("a", cpu=100, owner="w")]).unplaced
    best_effort = pod("b", cpu=0, mem_gi=0, owner="be")
    assert pool.place([best_effort]).placed == ((best_effort, "n0"),)


def test_node_selector_pods_use_the_label_index() -> None:
    nodes = [sim(f"n{i}", cpu=2000, labels={"pool": "gpu" if i % 5 == 4 else "web"}) for i in range(20)]
    pool = NodePool(nodes)
    gpu_only = Scheduling(node_selector=(("pool", "gpu"),))
    picky = [pod(f"g{i}", cpu=1500, owner="g", scheduling=gpu_only) for i in range(5)]
    result = pool.place(picky)
    assert [name for _, name in result.placed] == ["n4", "n9", "n14", "n19"]
    assert result.unplaced == (picky[4],)
    pool.add_node(sim("late", cpu=2000, labels={"pool": "gpu"}))  # indexed on arrival
    assert pool.place([picky[4]]).placed == ((picky[4], "late"),)


def test_rescheduling_a_node_onto_the_others() -> None:
    """The scale-down question: can all pods of n0 move, leaving n0 out?"""
    pool = pool_of(4000, 4000, 1000)
    mine = [pod(f"m{i}", cpu=1000, node_name="n0") for i in range(3)]
    for p in mine:
        pool.add_pod(p, "n0")
    moved = pool.place(mine, exclude={"n0"}, atomic=True)
    assert moved.complete and {name for _, name in moved.placed} <= {"n1", "n2"}
    pool.retire("n0")


# ------------------------------------------------------------------------------------ model-based

_spread = Scheduling(
    topology_spread=(TopologySpreadConstraint(1, HOSTNAME_LABEL, "DoNotSchedule", selector(app="s")),)
)
_picky = Scheduling(node_selector=(("pool", "odd"),))
_anti = Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app="x"), HOSTNAME_LABEL),))
_kinds = {
    "small": lambda i: pod(f"s{i}", cpu=300, owner="small", labels={"app": "small"}),
    "big": lambda i: pod(f"b{i}", cpu=1700, owner="big", labels={"app": "big"}),
    "spread": lambda i: pod(f"t{i}", cpu=200, owner="spread", labels={"app": "s"}, scheduling=_spread),
    "anti": lambda i: pod(f"x{i}", cpu=200, owner="anti", labels={"app": "x"}, scheduling=_anti),
    "free": lambda i: pod(f"f{i}", cpu=0, mem_gi=0, owner="free", labels={"app": "free"}),
    "picky": lambda i: pod(f"k{i}", cpu=400, owner="picky", labels={"app": "k"}, scheduling=_picky),
}
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("place"), st.sampled_from(sorted(_kinds)), st.integers(0, 4), st.booleans()),
        st.tuples(st.just("remove"), st.integers(0, 10**6), st.integers(0, 0), st.booleans()),
        st.tuples(st.just("retire"), st.integers(0, 4), st.integers(0, 0), st.booleans()),
        st.tuples(st.just("grow"), st.integers(500, 4000), st.integers(0, 0), st.booleans()),
    ),
    max_size=40,
)


def _naive_first_fit(p: Pod, nodes: list[SimNode], skip: set[str]) -> str | None:
    for n in nodes:
        if n.name not in skip and check(p, n) is None:
            return n.name
    return None


@settings(max_examples=300, deadline=None)
@given(cpus=st.lists(st.integers(500, 4000), min_size=1, max_size=5), ops=_ops)
def test_pool_matches_naive_first_fit(cpus: list[int], ops: list[tuple[str, object, int, bool]]) -> None:
    def make_node(i: int, c: int) -> SimNode:
        node = sim(f"n{i}", cpu=c, pods=6, labels={"pool": "odd" if i % 2 else "even"})
        if i == 0:
            node.add(pod("hog", cpu=c + 500, node_name=node.name))  # start overcommitted
        return node

    pool = NodePool(make_node(i, c) for i, c in enumerate(cpus))
    mirror = [make_node(i, c) for i, c in enumerate(cpus)]
    by_name = {n.name: n for n in mirror}
    retired: set[str] = set()
    placed: list[tuple[Pod, str]] = []
    for step, (op, arg, excl, atomic) in enumerate(ops):
        if op == "place":
            make = _kinds[str(arg)]
            exclude = {f"n{excl}"}
            pods = [make(f"{step}-{k}") for k in range(2)]
            result = pool.place(pods, exclude=exclude, atomic=atomic)
            # replay on the mirror with a naive scan
            expected: list[tuple[Pod, str]] = []
            failed = False
            for p in pods:
                name = _naive_first_fit(p, mirror, exclude | retired)
                if name is None:
                    failed = True
                    if atomic:
                        break
                    continue
                by_name[name].add(p)
                expected.append((p, name))
            if atomic and failed:
                for p, name in expected:
                    by_name[name].remove(p)
                expected = []
            assert list(result.placed) == expected
            placed.extend(expected)
        elif op == "remove" and placed:
            p, name = placed.pop(int(str(arg)) % len(placed))
            pool.remove_pod(p, name)
            by_name[name].remove(p)
        elif op == "retire":
            name = f"n{int(str(arg)) % len(mirror)}"
            pool.retire(name)
            retired.add(name)
        elif op == "grow":
            index = len(mirror)
            pool.add_node(make_node(index, int(str(arg))))
            mirror.append(make_node(index, int(str(arg))))
            by_name[mirror[-1].name] = mirror[-1]
    for n, m in zip(pool.nodes, mirror, strict=True):
        assert (n.cpu_free, n.pods_free, len(n.pods)) == (m.cpu_free, m.pods_free, len(m.pods))
