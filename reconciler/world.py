"""Observe the world: cluster state (live or from a dump) joined with the ASGs. The one place the
read-side edges are wired together, so `status` and `plan` see exactly the same picture."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from reconciler.aws.clients import aws_clients
from reconciler.aws.discovery import discover_node_groups
from reconciler.config import Config
from reconciler.inventory import Inventory, build_inventory
from reconciler.kube.client import api_client
from reconciler.kube.live import LiveReader
from reconciler.kube.snapshot import read_snapshot
from reconciler.model import ClusterState


def read_cluster(config: Config, snapshot: Path | None, now: datetime) -> ClusterState:
    if snapshot is not None:
        return read_snapshot(snapshot, now)
    return LiveReader(api_client(config.kubernetes), config.kubernetes.page_size).read(now)


def observe(config: Config, snapshot: Path | None, now: datetime) -> Inventory:
    state = read_cluster(config, snapshot, now)
    autoscaling, ec2 = aws_clients(config)
    groups = discover_node_groups(config, autoscaling, ec2)
    return build_inventory(state, groups)
