"""Observe the world: cluster state (live or from a dump) joined with the ASGs. The one place the
read-side edges are wired together, so `status` and `plan` see exactly the same picture."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from reconciler.aws.discovery import ClusterView, Described
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import ClusterState
from reconciler.domain.snapshot_completeness import require_complete_for
from reconciler.kube.client import api_client
from reconciler.kube.live import LiveReader
from reconciler.kube.snapshot import read_snapshot


def read_cluster(config: Config, snapshot: Path | None, now: datetime, *, pods: bool = True) -> ClusterState:
    kube = config.kubernetes
    names = (kube.autoscaler_lease, kube.autoscaler_status)
    if snapshot is not None:
        return read_snapshot(snapshot, now, names, kube.autoscaler_namespaces)
    reader = LiveReader(api_client(kube), kube.page_size, names, kube.autoscaler_namespaces)
    return reader.read(now, pods=pods)


def cluster_view(state: ClusterState) -> ClusterView:
    """Instances with a node, and with a Ready schedulable one (the inventory's template source)."""
    nodes = [n for n in state.nodes if n.instance_id]
    return ClusterView(
        registered=frozenset(n.instance_id for n in nodes),
        ready=frozenset(n.instance_id for n in nodes if n.ready and not n.unschedulable),
    )


def observe(
    config: Config,
    snapshot: Path | None,
    now: datetime,
    reader: AwsReader | None = None,
    *,
    refreshes: bool = False,
    cluster: Callable[[datetime], ClusterState] | None = None,
    pods: bool = True,
) -> Inventory:
    """`refreshes`: ask every group whether an instance refresh is under way (`status`); plan and
    apply ask only for the groups whose answer changes what they do. `cluster`: where the cluster
    state comes from instead of a live read (`run`'s plan stage: its watch-fed cache); apply and
    the one-shot commands never pass one. `pods=False` (live only): the nodes without their pods,
    for an apply with no removal to judge."""
    if cluster is not None and snapshot is None:
        state = cluster(now)
    else:
        state = read_cluster(config, snapshot, now, pods=pods)

    def vet(described: Described) -> None:
        """A dump lacking nodes or pods would read as instances serving nothing: refused from the
        ASG descriptions alone, before instances, templates or types are asked of AWS."""
        if snapshot is not None:
            require_complete_for(state, in_service(described), str(snapshot))

    reader = reader or AwsReader(config)
    return build_inventory(
        state, reader.node_groups(config, cluster_view(state), refreshes=refreshes, vet=vet)
    )


def in_service(described: Described) -> dict[str, list[str]]:
    return {
        f.name: [
            i["InstanceId"] for i in f.asg.get("Instances", []) if i.get("LifecycleState") == "InService"
        ]
        for f in described.found
    }
