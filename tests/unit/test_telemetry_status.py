"""The status document: what it holds per group and stage, and that nothing in it moves while nothing
happens (it is written only when its text changes)."""

from __future__ import annotations

from datetime import timedelta

import yaml

from reconciler.domain.model import Scheduling
from reconciler.planning.types import Backoff, PlannerMemory
from reconciler.telemetry.status import (
    StageResult,
    coarse_age,
    render_status,
    settle,
    status_document,
)
from tests.support.plan_world import NOW, World, template


def world() -> World:
    general = {"pool": "general"}
    w = World().group("general", min_size=1, max_size=6, tmpl=template(labels=general))
    w.group("spot", max_size=4)
    w.node("general", "n1", cpu=4000, labels=general).running("n1", "busy", cpu=3900)
    w.node("general", "sick", ready=False, labels=general)
    w.unregistered("general", timedelta(minutes=2))
    w.node("spot", "s1", cpu=4000).running("s1", "app", cpu=3000)
    w.node("spot", "s-idle", cpu=4000)
    only_general = Scheduling(node_selector=(("pool", "general"),))
    w.pending("web-1", cpu=3500, scheduling=only_general)  # onto the instance still registering
    w.pending("web-2", cpu=3500, scheduling=only_general)  # onto a new node
    w.pending("giant", cpu=64000)
    return w


def results(at: timedelta = timedelta(0)) -> dict[str, StageResult]:
    return {
        "plan": StageResult("plan", NOW + at, True, "general 3->4", "c0ffee"),
        "apply": StageResult("apply", NOW + at, False, "general failed", "c0ffee"),
    }


def test_document_per_group_and_stage() -> None:
    w = world()
    plan = w.plan(scale_down={"unneeded_time": timedelta(0)})
    doc = status_document(
        "test",
        plan,
        results(),
        {"spot": ("i-sidle",)},
        3 * 3600 + 59,
        inventory=w.inventory(),
        proposal_branch="asg-reconciler/test/scale-down",
        now=NOW,
    )
    assert doc["cluster"] == "test" and doc["autoscalerStatus"] == "Running"
    general, spot = doc["nodeGroups"]
    assert general == {
        "name": "general",
        "minSize": 1,
        "maxSize": 6,
        "current": 3,
        "target": 4,
        "action": "scale-up",
        "scaleUp": {"status": "Needed"},
        "scaleDown": {"status": "NoCandidates", "removeInstances": []},
        "health": {"registered": {"total": 2, "ready": 1, "unready": 1}, "unregistered": 1},
    }
    assert spot["scaleDown"] == {"status": "CandidatesPresent", "removeInstances": ["i-sidle"]}
    assert doc["clusterWide"] == {
        "scaleUp": {"status": "Needed", "podsTriggeredScaleUp": 1, "podsNoScaleUp": 1},
        "scaleDown": {"status": "CandidatesPresent", "candidates": 1},
    }
    assert doc["last"] == {
        "apply": {"ok": False, "outcome": "general failed", "commit": "c0ffee"},
        "plan": {"ok": True, "outcome": "general 3->4", "commit": "c0ffee"},
    }
    assert doc["proposal"] == {
        "branch": "asg-reconciler/test/scale-down",
        "instances": {"spot": ["i-sidle"]},
        "age": "3h",
        "openedAt": "2026-06-01T08:59:01Z",
    }
    assert yaml.safe_load(render_status(doc)) == doc


def test_backoff_suspended_and_before_the_first_plan() -> None:
    w = world()
    memory = PlannerMemory(backoffs={"general": Backoff(NOW + timedelta(minutes=5), 1)})
    plan = w.plan(memory=memory)
    doc = status_document("test", plan, {}, None, None, "apply is suspended by ops: incident 42")
    assert doc["autoscalerStatus"] == "Suspended"
    assert doc["message"] == "apply is suspended by ops: incident 42"
    assert doc["nodeGroups"][0]["scaleUp"] == {"status": "Backoff", "backoffUntil": "2026-06-01T12:05:00Z"}
    assert "proposal" not in doc and "health" not in doc["nodeGroups"][0]
    assert status_document("test", None, {}, None, None) == {
        "cluster": "test",
        "autoscalerStatus": "Initializing",
        "last": {},
    }


def test_the_same_state_renders_the_same_text_cycle_after_cycle() -> None:
    """Cycles 30 s apart, nothing changed: the results' finish times and the proposal's age move,
    the text does not (so the ConfigMap is not rewritten)."""
    w = world()
    texts = set()
    for cycle in range(20):
        at = timedelta(seconds=30 * cycle)
        plan = w.plan(scale_down={"unneeded_time": timedelta(0)}, now=NOW + at)
        doc = status_document(
            "test",
            plan,
            results(at),
            {"spot": ("i-sidle",)},
            600 + at.total_seconds(),
            inventory=w.inventory(),
        )
        texts.add(render_status(doc))
    assert len(texts) == 1
    text = texts.pop()
    assert text.startswith("autoscalerStatus: Running\ncluster: test\nclusterWide:\n")  # keys sorted
    assert "12:0" not in text  # no time of day at all


def test_settle_keeps_the_time_an_outcome_began() -> None:
    first = settle(None, StageResult("apply", NOW, True, "in sync", "abc"))
    assert first.since == NOW
    later = settle(first, StageResult("apply", NOW + timedelta(seconds=30), True, "in sync", "abc"))
    assert later.since == NOW and later.finished_at == NOW + timedelta(seconds=30)
    doc_a = status_document("test", None, {"apply": first}, None, None)
    doc_b = status_document("test", None, {"apply": later}, None, None)
    assert render_status(doc_a) == render_status(doc_b)
    assert doc_a["last"]["apply"]["since"] == "2026-06-01T12:00:00Z"
    changed = settle(
        later, StageResult("apply", NOW + timedelta(seconds=60), True, "general scale-up", "def")
    )
    assert changed.since == NOW + timedelta(seconds=60)


def test_coarse_age() -> None:
    assert [coarse_age(s) for s in (-5, 0, 3599, 3600, 7199, 86400 + 3 * 3600 + 5)] == [
        "under 1h",
        "under 1h",
        "under 1h",
        "1h",
        "1h",
        "1d 3h",
    ]
