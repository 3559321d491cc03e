"""Steps the run tests share on apply's World."""

from __future__ import annotations

from tests.support import k8s_objects as k
from tests.support.apply_world import World


def pending(world: World, name: str, cpu: str = "1850m") -> None:
    """A pod no node has room for (node-b has 1830m free): it needs a new node."""
    world.kube.put(k.pod(name, "shop", requests={"cpu": cpu}, owner_kind="ReplicaSet", owner_name="web"))
