"""The kill switch and the status ConfigMap are shipped by the kustomize base (issue 28), so no
stage needs `create` on ConfigMaps. The code must work with them already there and empty: an empty
switch is "not suspended", `suspend` and `resume` patch it (never create), and apply obeys."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.apply_world import World, approved, untouched
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen

CONTROL = "asg-reconciler-control"
NAMESPACE = "kube-system"  # the test world's run.namespace (none set: outside a pod, kube-system)


def shipped(world: World) -> None:
    """As base/configmaps.yaml deploys it: no data at all."""
    world.kube.put(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONTROL, "namespace": NAMESPACE}}
    )


def configmap_creates(world: World) -> list[Any]:
    return [r for r in world.kube.requests if r.method.upper() == "POST" and r.path.endswith("/configmaps")]


def test_an_empty_shipped_switch_is_off_and_suspend_patches_it(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped(world)
    approved(world, capsys)
    world.kube.requests[:] = []
    suspended = world.cli(capsys, "suspend", "--reason", "incident 42")
    assert suspended.code == 0, suspended.err
    refused = world.cli(capsys, "apply")
    assert refused.code == 3 and "suspended" in refused.out + refused.err, refused
    untouched(world)
    resumed = world.cli(capsys, "resume")
    assert resumed.code == 0, resumed.err
    found = world.kube.get_object("ConfigMap", NAMESPACE, CONTROL)
    assert found is not None and not (found.get("data") or {}).get("suspend")
    assert configmap_creates(world) == []  # patched in place: no create, which no Role grants
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1


def test_apply_runs_beside_the_empty_shipped_switch(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    shipped(world)
    approved(world, capsys)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1
