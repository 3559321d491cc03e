"""The free-capacity index finds exactly what a scan would, given its upper-bound contract."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.planning.freeindex import ANY, FreeIndex
from reconciler.planning.simnode import SimNode
from tests.support.planning_factories import pod, sim


def _scan(nodes: list[SimNode], retired: set[int], start: int, cpu: int, mem: int) -> int:
    for i in range(start, len(nodes)):
        n = nodes[i]
        if i not in retired and n.pods_free >= 1 and n.cpu_free >= cpu and n.mem_free >= mem:
            return i
    return -1


_free = st.tuples(st.integers(-500, 4000), st.integers(0, 16), st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(
    frees=st.lists(_free, min_size=1, max_size=40),
    extra=st.lists(_free, max_size=10),
    retire=st.sets(st.integers(0, 49), max_size=5),
    start=st.integers(0, 50),
    cpu=st.integers(0, 4000),
    mem=st.integers(0, 16),
)
def test_find_matches_a_scan(
    frees: list[tuple[int, int, int]],
    extra: list[tuple[int, int, int]],
    retire: set[int],
    start: int,
    cpu: int,
    mem: int,
) -> None:
    def make(i: int, c: int, m: int, p: int) -> SimNode:
        n = sim(f"n{i}", cpu=max(c, 0), mem_gi=m, pods=p)
        if c < 0:
            n.cpu_free = c  # overcommitted
        return n

    nodes = [make(i, *f) for i, f in enumerate(frees)]
    index = FreeIndex(nodes)
    early = {r for r in retire if r < len(nodes)}
    for r in early:  # retired before the index grows: a rebuild must keep them out
        index.retire(r)
    for j, f in enumerate(extra):  # growth past the initial size
        nodes.append(make(len(frees) + j, *f))
        index.append(nodes[-1], nodes)
    retired = {r for r in retire if r < len(nodes)}
    for r in retired - early:
        index.retire(r)
    cpu_need = cpu or ANY
    mem_need = mem * 2**30 or ANY
    expected = _scan(nodes, retired, start, cpu_need, mem_need)
    assert index.find(start, cpu_need, mem_need) == expected


def test_stale_upper_bounds_are_refreshed() -> None:
    nodes = [sim("a", cpu=1000), sim("b", cpu=1000)]
    index = FreeIndex(nodes)
    nodes[0].add(pod("x", cpu=900))  # booked without telling the index: the bound is stale-high
    assert index.find(0, 500, ANY) == 0  # the caller sees it does not fit and refreshes
    index.refresh(0, nodes[0])
    assert index.find(0, 500, ANY) == 1
