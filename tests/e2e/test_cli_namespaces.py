"""Namespaces the identity may not list: plan, status and apply read the rest, and each says what is
missing and which permission would fix it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from reconciler.kube.live import NAMESPACES_FORBIDDEN
from tests.support import k8s_objects as k
from tests.support.apply_world import World
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen


def forbid_namespaces(world: World) -> None:
    world.kube.fault = lambda method, path, query: (403, None) if path == "/api/v1/namespaces" else None


def test_plan_status_and_apply_go_on_and_warn_when_namespaces_are_forbidden(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    forbid_namespaces(world)
    dry = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    assert dry.code == 0, dry.err
    document = json.loads(dry.out)
    jsonschema.validate(document, load_schema("plan"))
    assert document["warnings"] == [NAMESPACES_FORBIDDEN]
    assert "grant `list` on `namespaces`" in NAMESPACES_FORBIDDEN

    written = world.cli(capsys, "plan")  # the scale-down proposal is written all the same
    assert written.code == 0, written.err
    assert f"! {NAMESPACES_FORBIDDEN}" in written.out

    status = world.cli(capsys, "status", "--output", "json")
    assert status.code == 0, status.err
    assert NAMESPACES_FORBIDDEN in json.loads(status.out)["warnings"]

    applied = world.cli(capsys, "apply", "--dry-run")  # no removal on main to judge: no namespaces read
    assert applied.code == 0, applied.out + applied.err
    assert NAMESPACES_FORBIDDEN not in applied.out
    assert world.cli(capsys, "approve", "scale-down").code == 0
    judged = world.cli(capsys, "apply", "--dry-run")  # the approved removal is judged on every pod
    assert judged.code == 0, judged.out + judged.err
    assert f"! {NAMESPACES_FORBIDDEN}" in judged.out


def test_listed_namespaces_warn_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.kube.put(k.namespace("shop", labels={"team": "shop"}))
    dry = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    assert dry.code == 0, dry.err
    assert json.loads(dry.out)["warnings"] == []
    assert ("GET", "/api/v1/namespaces") in world.kube.calls


def pending_with_a_namespace_selector() -> dict[str, object]:
    """Kept off nodes running `app: web` pods of namespaces labelled `team: shop`."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "namespaceSelector": {"matchLabels": {"team": "shop"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return k.pod(
        "report-0",
        "batch",
        requests={"cpu": "100m"},
        owner_kind="Job",
        owner_name="report",
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )


@pytest.mark.parametrize("forbidden", [False, True])
def test_the_listed_labels_reach_the_planner(
    world: World, capsys: pytest.CaptureFixture[str], forbidden: bool
) -> None:
    world.kube.put(k.namespace("shop", labels={"team": "shop"}))
    world.kube.put(k.namespace("batch"))
    world.kube.put(pending_with_a_namespace_selector())
    if forbidden:
        forbid_namespaces(world)
    dry = world.cli(capsys, "plan", "--dry-run", "--output", "json")
    assert dry.code == 0, dry.err
    (outcome,) = [p for p in json.loads(dry.out)["pendingPods"] if p["pod"] == "batch/report-0"]
    if forbidden:
        assert outcome["nodeGroup"] is None
        assert "namespaces were not read" in outcome["reason"]
    else:
        assert outcome["nodeGroup"] == "general", outcome
