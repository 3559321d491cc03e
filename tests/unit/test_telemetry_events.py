"""The Events a plan and an apply report call for: reasons and wording as cluster-autoscaler's, stable
messages, bounded length. Plans come from the real planner on small worlds."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

from reconciler.apply.outcome import ApplyReport, GroupOutcome
from reconciler.domain.event import MAX_MESSAGE_BYTES, NODE, NORMAL, POD, WARNING, EventSpec, bounded
from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.planning.types import Plan
from reconciler.telemetry.events import apply_events, plan_events
from tests.support.plan_world import NOW, World


def scale_up_world() -> Plan:
    """general is full: web-1 needs a new node, giant fits nowhere, young waits for newPodDelay,
    leaving is being deleted."""
    w = World().group("general", max_size=6)
    w.node("general", "n1", cpu=1000).running("n1", "busy", cpu=900)
    w.pending("web-1", cpu=800)
    w.pending("giant", cpu=64000, namespace="batch")
    w.pending("young", cpu=800, created=NOW - timedelta(seconds=1))
    w.pending("leaving", cpu=800, deleting_since=NOW - timedelta(seconds=5))
    return w.plan(scale_up={"new_pod_delay": timedelta(seconds=10)})


def scale_down_world() -> Plan:
    w = World().group("general", max_size=6)
    w.node("general", "n1", cpu=4000).running("n1", "busy", cpu=3000)
    w.node("general", "idle", cpu=4000)
    return w.plan(scale_down={"unneeded_time": timedelta(0)})


def by_reason(events: list[EventSpec]) -> dict[str, list[EventSpec]]:
    found: dict[str, list[EventSpec]] = {}
    for e in events:
        found.setdefault(e.reason, []).append(e)
    return found


def test_pods_the_plan_helps_and_cannot_help() -> None:
    plan = scale_up_world()
    uids = {"default/web-1": "uid-web", "batch/giant": "uid-giant"}
    events = by_reason(plan_events(plan, pod_uids=uids))
    assert events.keys() == {"TriggeredScaleUp", "NotTriggerScaleUp"}
    [up] = events["TriggeredScaleUp"]
    assert up == EventSpec(
        POD,
        "default",
        "web-1",
        "uid-web",
        NORMAL,
        "TriggeredScaleUp",
        "pod triggered scale-up: [{general 1->2 (max: 6)}]",
    )
    [no] = events["NotTriggerScaleUp"]
    assert (no.kind, no.namespace, no.name, no.uid, no.type) == (POD, "batch", "giant", "uid-giant", NORMAL)
    assert no.message.startswith("pod didn't trigger scale-up: no node group can help: general: insufficient")


def test_no_verdict_no_event() -> None:
    """A pod inside newPodDelay or being deleted gets no NotTriggerScaleUp (CA emits none either).
    This also holds the planner's wording and telemetry's _NOT_A_VERDICT in step."""
    plan = scale_up_world()
    reasons = {o.pod: o.reason for o in plan.pending}
    assert reasons["default/young"].startswith("younger than")
    assert reasons["default/leaving"].startswith("being deleted")
    named = {e.name for e in plan_events(plan)}
    assert named == {"web-1", "giant"}


def test_pods_waiting_for_preemption_trigger_nothing() -> None:
    """CA books a nominated pod on its node and never shows it to scale-up: no event, even when the
    node it was nominated to is gone or belongs to no group."""
    w = World().group("general", max_size=6)
    w.node("general", "n1", cpu=1000).running("n1", "victim", cpu=900, priority=-5)
    w.pending("urgent", cpu=800, nominated_node="n1")
    w.pending("orphan", cpu=800, nominated_node="gone")
    plan = w.plan()
    assert [o.reason.startswith("waiting for preemption") for o in plan.pending] == [True, True]
    assert plan_events(plan) == []


def test_pods_fitting_existing_capacity_trigger_nothing() -> None:
    w = World().group("general", max_size=6)
    w.node("general", "n1", cpu=4000)
    w.pending("web-1", cpu=800)
    plan = w.plan()
    assert [o.reason for o in plan.pending] == ["fits existing capacity"]
    assert plan_events(plan) == []


def test_scale_down_proposed_on_the_node_with_stable_message() -> None:
    plan = scale_down_world()
    assert plan.group("general").remove_instances == ("i-idle",)
    events = plan_events(
        plan, proposed={"general": ("i-idle",)}, proposal_branch="asg-reconciler/test/scale-down"
    )
    assert events == [
        EventSpec(
            NODE,
            "",
            "idle",
            "idle",  # no uid known: the node's name, as the kubelet does
            NORMAL,
            "ScaleDownProposed",
            "named in asg-reconciler's scale-down proposal for node group general "
            "(branch asg-reconciler/test/scale-down): instance i-idle is drained and terminated once "
            "the proposal is approved",
        )
    ]
    # a later plan (the node unneeded longer, utilisation moved) tells the same thing the same way
    later = World().group("general", max_size=6)
    later.node("general", "n1", cpu=4000).running("n1", "busy", cpu=2500)
    later.node("general", "idle", cpu=4000)
    again = later.plan(scale_down={"unneeded_time": timedelta(0)}, now=NOW + timedelta(minutes=7))
    assert plan_events(
        again, proposed={"general": ("i-idle",)}, proposal_branch="asg-reconciler/test/scale-down"
    ) == (events)


def test_proposed_instances_without_a_node_and_node_uids() -> None:
    plan = scale_down_world()
    events = plan_events(
        plan,
        proposed={"general": ("i-idle", "i-unregistered", "i-other")},
        node_uids={"idle": "uid-idle", "other": "uid-other"},
        node_of={"i-other": "other"},
    )
    assert [(e.name, e.uid) for e in events] == [("idle", "uid-idle"), ("other", "uid-other")]
    assert plan_events(plan) == []  # nothing open: the plan's own removals are not yet a proposal


def report(**kw: object) -> ApplyReport:
    base: dict[str, object] = {
        "commit": "0123456789abcdef0123",
        "dry_run": False,
        "groups": (
            GroupOutcome(
                "general",
                "scale-down",
                3,
                1,
                terminated=("i-a", "i-b", "i-c"),
                notes=(
                    "drained node-a and terminated i-a",
                    "drained node-b and terminated i-b",
                    "terminated i-c (no node)",
                ),
            ),
        ),
        "given_back": ("node-x: given back (not removed by this run; drain taint from 0123456789ab)",),
        "stuck": ("node-y: still carries the drain taint (HTTP 500 Internal); the next apply gives it back",),
    }
    base.update(kw)
    return ApplyReport(**base)  # type: ignore[arg-type]


def test_apply_events() -> None:
    events = apply_events(report(), node_uids={"node-a": "uid-a"})
    assert [(e.reason, e.type, e.name, e.uid) for e in events] == [
        ("ScaleDown", NORMAL, "node-a", "uid-a"),
        ("ScaleDown", NORMAL, "node-b", "node-b"),
        ("ScaleDownGivenBack", NORMAL, "node-x", "node-x"),
        ("ScaleDownGivenBack", WARNING, "node-y", "node-y"),
    ]
    assert all(e.kind == NODE and e.namespace == "" for e in events)
    assert events[0].message == (
        "node removed by asg-reconciler: drained, instance i-a terminated "
        "(node group general, commit 0123456789ab)"
    )
    assert events[2].message == (
        f"removed {OWN_DRAIN_TAINT} taint from node node-x "
        "(not removed by this run; drain taint from 0123456789ab)"
    )
    assert events[3].message == (
        f"failed to remove {OWN_DRAIN_TAINT} taint from node node-y: (HTTP 500 Internal); "
        "the next apply gives it back"
    )


def test_apply_events_node_of_wins_and_dry_run_tells_nothing() -> None:
    events = apply_events(report(given_back=(), stuck=()), node_of={"i-a": "real-a", "i-c": "node-c"})
    assert [e.name for e in events] == ["real-a", "node-b", "node-c"]
    dry = report(dry_run=True, given_back=("node-x: would be given back (x; drain taint from abc)",))
    assert apply_events(dry) == []


def test_messages_are_bounded_to_1kib() -> None:
    long_reason = "é" * 2000  # two bytes each: cut between characters, never inside one
    spec = EventSpec(POD, "ns", "p", "", NORMAL, "NotTriggerScaleUp", long_reason)
    assert len(spec.message.encode()) <= MAX_MESSAGE_BYTES
    assert spec.message.endswith("...")
    assert spec.message.startswith("é" * 500)
    assert bounded("short") == "short"
    assert bounded("x" * MAX_MESSAGE_BYTES) == "x" * MAX_MESSAGE_BYTES


SCRIPT = """
import sys
import reconciler.telemetry.events, reconciler.telemetry.status
print("\\n".join(sorted(sys.modules)))
"""


def test_events_and_status_import_no_edge_library() -> None:
    """telemetry/ is pure: the loop reports on kubernetes, AWS and git failing without them."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True, text=True).stdout
    bad = [m for m in out.split() if m.split(".")[0] in ("kubernetes", "boto3", "botocore", "git")]
    assert bad == []


def test_a_pod_that_fits_a_node_of_no_group_is_not_one_no_group_can_help() -> None:
    """No NotTriggerScaleUp, and helpable in the pending-pods gauge: it has a place."""
    from prometheus_client import CollectorRegistry

    from reconciler.planning.types import PodOutcome
    from reconciler.telemetry.events import cannot_help
    from reconciler.telemetry.metrics import Metrics

    placed = PodOutcome("batch/report-0", None, "fits existing capacity", node="self-managed-1")
    stuck = PodOutcome("batch/giant-0", None, "no node group can help: general: insufficient cpu")
    assert not cannot_help(placed) and cannot_help(stuck)
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.plan(Plan(cluster="prod", groups=(), pending=(placed, stuck), unremovable=()), NOW)
    assert registry.get_sample_value("asg_reconciler_pending_pods", {"helpable": "true"}) == 1
    assert registry.get_sample_value("asg_reconciler_pending_pods", {"helpable": "false"}) == 1
