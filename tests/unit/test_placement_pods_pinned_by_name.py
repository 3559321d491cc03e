"""A pod pinned to nodes by name (required node affinity on `metadata.name`, as the DaemonSet
controller pins its pods: what `what-if` adds for a new DaemonSet, one per node) is judged on those
nodes only. Walking the whole pool for each made a DaemonSet on a 5,000-node cluster 25 million
predicate checks (34 s of planning); the answer must stay the one a full scan gives."""

from __future__ import annotations

import pytest

from reconciler.domain.model import NodeSelectorTerm, Pod, Scheduling, SelectorRequirement
from reconciler.planning import placement
from reconciler.planning.placement import NodePool
from tests.support.planning_factories import pod, sim

NODES = 2000


def pinned(name: str, *nodes: str, cpu: int = 100, also: tuple[SelectorRequirement, ...] = ()) -> Pod:
    field = SelectorRequirement("metadata.name", "In", tuple(nodes))
    term = NodeSelectorTerm(match_expressions=also, match_fields=(field,))
    return pod(name, cpu=cpu, owner=None, scheduling=Scheduling(required_node_affinity=(term,)))


def test_each_pinned_pod_is_judged_on_its_own_node_only(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = NodePool(sim(f"n{i}", cpu=4000) for i in range(NODES))
    calls = 0
    real = placement.fits_besides_resources

    def counting(*args: object, **kwargs: object) -> bool:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(placement, "fits_besides_resources", counting)
    pods = [pinned(f"agent-n{i}", f"n{i}") for i in range(NODES)]
    result = pool.place(pods)
    assert [node for _, node in result.placed] == [f"n{i}" for i in range(NODES)]
    assert calls <= 2 * NODES


def test_the_answer_is_a_full_scans() -> None:
    """Pinned to several nodes: the first in pool order that fits; to nodes that are full, retired,
    excluded or absent: none; a term that also asks for a label is ANDed with it."""
    pool = NodePool([sim("a", cpu=500), sim("b", cpu=4000), sim("c", cpu=4000), sim("d", cpu=4000)])
    pool.retire("c")
    assert pool.fits_somewhere(pinned("x", "d", "a", "b", cpu=1000)) == "b"
    assert pool.fits_somewhere(pinned("x", "a", cpu=1000)) is None
    assert pool.fits_somewhere(pinned("x", "c")) is None
    assert pool.fits_somewhere(pinned("x", "b"), exclude={"b"}) is None
    assert pool.fits_somewhere(pinned("x", "gone")) is None
    labelled = pinned("x", "b", "d", also=(SelectorRequirement("team", "In", ("blue",)),))
    assert pool.fits_somewhere(labelled) is None
