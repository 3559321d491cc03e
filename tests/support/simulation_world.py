"""A simulated cluster for the simulate tests: the shipped instance types and prices, arrivals,
a trace of one group, one engine run."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from reconciler.config.settings import Config
from reconciler.runtime.price_table import prices_from_document
from reconciler.simulation.cluster import instance_types_from_document
from reconciler.simulation.engine import Settings, simulate
from reconciler.simulation.policies import (
    Policy,
    ProvisioningModel,
)
from reconciler.simulation.trace import Trace, parse_trace

START = "2026-06-01T00:00:00Z"  # a Monday

FIXED_90S = ProvisioningModel(fixed=(("*", 90.0),))


def _data(name: str) -> Any:
    return json.loads(resources.files("reconciler.simulation").joinpath("data", name).read_text())


TYPES = instance_types_from_document(_data("instance_types.json"), "instance_types.json")

PRICES = prices_from_document(_data("prices.json"), "prices.json")


def arrive(name: str, at: float, cpu: str, run_for: float | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "kind": "arrive",
        "at": at,
        "pod": {
            "metadata": {
                "name": name,
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web",
                        "uid": "u1",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]
            },
        },
    }
    if run_for is not None:
        line["runFor"] = run_for
    return line


def trace_of(desired: int, *events: dict[str, Any], min_size: int = 0, max_size: int = 10) -> Trace:
    group = {
        "name": "general",
        "instanceType": "m5.large",  # 1930m CPU allocatable
        "minSize": min_size,
        "maxSize": max_size,
        "desired": desired,
        "zones": ["us-east-1a"],
    }
    return parse_trace("test", [{"kind": "cluster", "start": START, "groups": [group]}, *events])


def run(
    trace: Trace,
    policy: Policy,
    hours: float,
    *,
    seed: int = 1,
    provisioning: ProvisioningModel = FIXED_90S,
    config: Config | None = None,
) -> Any:
    settings = Settings(TYPES, PRICES, seed, provisioning, duration=hours * 3600)
    return simulate(trace, config or Config(cluster="sim"), settings, policy)


def idle_node_trace() -> Trace:
    # a-big fills one node (78%); b-small lands on the emptier one (least allocated), which is then
    # unneeded from the first plan on: its pod fits beside a-big
    return trace_of(2, arrive("a-big", 0, "1500m"), arrive("b-small", 0, "100m"), min_size=1)
