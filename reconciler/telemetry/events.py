"""What the `run` loop tells `kubectl describe`: the Events a plan and an apply report call for.

Pure: a Plan or an ApplyReport in, EventSpecs out; reconciler/kube/events.py writes them. The reasons
are the ones cluster-autoscaler users already grep for, worded as CA words them (CA 1.37 source):

  Pod  TriggeredScaleUp    Normal   "pod triggered scale-up: [{general 2->4 (max: 6)}]"
                                    (processors/status/eventing_scale_up_processor.go; the braces are
                                    nodegroupset.ScaleUpInfo.String: "{%v %v->%v (max: %v)}")
  Pod  NotTriggerScaleUp   Normal   "pod didn't trigger scale-up: <the planner's reason>"
  Node ScaleDownProposed   Normal   ours: named in an open scale-down proposal, awaiting approval
  Node ScaleDown           Normal   "node removed by asg-reconciler: ..." (CA: "nodes removed by
                                    cluster autoscaler", core/scaledown/actuation/delete_in_batch.go)
  ConfigMap FailedToScaleUpGroup
                           Warning  "Scale-up failed for group spot: AWS could not launch 2 instance(s):
                                    InsufficientInstanceCapacity (OutOfResources): <AWS's message>", on
                                    the status ConfigMap, as CA records it on its own (scaleup executor:
                                    "Scale-up failed for group %s: %v"), while the group is backed off
  Node ScaleDownGivenBack  Normal   ours: "removed <taint> taint from node <n> (...)" as CA's
                           Warning  ClusterAutoscalerCleanup words it (utils/taints/taints.go), and
                                    "failed to remove ..." when the taint could not be taken off

Every message must stay the same from one cycle to the next while nothing changed: the recorder
de-duplicates on it, so a message carrying "for 14m" would open a new Event every minute. That is
why ScaleDownProposed does not repeat the removal's reason (utilisation, "unneeded for 14m").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from reconciler.apply.outcome import ApplyReport
from reconciler.domain.event import CONFIGMAP, NODE, NORMAL, POD, WARNING, EventSpec
from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.planning.types import GroupPlan, Plan, PodOutcome

TRIGGERED_SCALE_UP = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
SCALE_DOWN_PROPOSED = "ScaleDownProposed"
SCALE_DOWN = "ScaleDown"
SCALE_DOWN_GIVEN_BACK = "ScaleDownGivenBack"
FAILED_TO_SCALE_UP_GROUP = "FailedToScaleUpGroup"


# Outcomes that are not a verdict on the pod: it is about to go, still inside scaleUp.newPodDelay, or
# nominated to a node (CA keeps all three from its scale-up and emits nothing for them). The planner's
# own wording, in reconciler/planning/plan.py; tests/unit/test_telemetry_events.py holds the two in step.
_NOT_A_VERDICT = ("being deleted", "younger than", "waiting for preemption")
_DRAINED = re.compile(r"^drained (\S+) and terminated (\S+)$")


def scale_up_info(group: GroupPlan) -> str:
    """CA's ScaleUpInfo as it prints in events: `{name current->new (max: N)}`."""
    return f"{{{group.name} {group.current}->{group.desired} (max: {group.max_size})}}"


def triggered_scale_up(outcome: PodOutcome, groups: Mapping[str, GroupPlan]) -> GroupPlan | None:
    """The group whose new nodes this plan adds for the pod, or None: a pod that fits existing or
    upcoming capacity carries a reason ("fits ...") and triggers nothing, as in CA."""
    if outcome.node_group is None or outcome.reason:
        return None
    group = groups.get(outcome.node_group)
    return group if group is not None and group.new_nodes > 0 else None


def cannot_help(outcome: PodOutcome) -> bool:
    """A pending pod no group can help, with a reason worth telling (not "too young", not "leaving")."""
    return not outcome.placed and bool(outcome.reason) and not outcome.reason.startswith(_NOT_A_VERDICT)


def plan_events(
    plan: Plan,
    proposed: Mapping[str, tuple[str, ...]] | None = None,
    pod_uids: Mapping[str, str] | None = None,
    node_uids: Mapping[str, str] | None = None,
    *,
    node_of: Mapping[str, str] | None = None,
    proposal_branch: str = "",
    status_configmap: tuple[str, str] | None = None,
) -> list[EventSpec]:
    """Events for one plan. `proposed`: the open scale-down proposal, group -> instance ids;
    `pod_uids`: "namespace/name" -> uid (`kubectl describe pod` finds events by uid, so a pod
    without one still gets its event but only `kubectl get events` shows it); `node_uids`: node name
    -> uid, else the node's name is used, as the kubelet does (`kubectl describe node` looks under
    both); `node_of`: instance id -> node name for proposed instances the plan's removals do not
    name. An instance with no node (never registered) has nothing to describe and gets no event.
    `status_configmap`: (namespace, name) of the status ConfigMap, which carries a group's
    FailedToScaleUpGroup (none without it)."""
    pod_uids, node_uids = pod_uids or {}, node_uids or {}
    groups = {g.name: g for g in plan.groups}
    events: list[EventSpec] = []
    for outcome in plan.pending:
        namespace, _, name = outcome.pod.partition("/")
        uid = pod_uids.get(outcome.pod, "")
        group = triggered_scale_up(outcome, groups)
        if group is not None:
            message = f"pod triggered scale-up: [{scale_up_info(group)}]"
            events.append(EventSpec(POD, namespace, name, uid, NORMAL, TRIGGERED_SCALE_UP, message))
        elif cannot_help(outcome):
            message = f"pod didn't trigger scale-up: {outcome.reason}"
            events.append(EventSpec(POD, namespace, name, uid, NORMAL, NOT_TRIGGER_SCALE_UP, message))
    if status_configmap is not None:
        events.extend(failed_scale_ups(plan, *status_configmap))
    instance_node = {r.instance_id: r.node for g in plan.groups for r in g.removals if r.node}
    instance_node.update(node_of or {})
    where = f" (branch {proposal_branch})" if proposal_branch else ""
    for group_name, instances in sorted((proposed or {}).items()):
        for instance in instances:
            node = instance_node.get(instance)
            if not node:
                continue
            message = (
                f"named in asg-reconciler's scale-down proposal for node group {group_name}{where}: "
                f"instance {instance} is drained and terminated once the proposal is approved"
            )
            events.append(
                EventSpec(NODE, "", node, node_uids.get(node) or node, NORMAL, SCALE_DOWN_PROPOSED, message)
            )
    return events


def failed_scale_ups(plan: Plan, namespace: str, name: str) -> list[EventSpec]:
    """A FailedToScaleUpGroup per group backed off because AWS could not launch for it. The
    message carries no time (AWS's retries with the same reason are one Event, counted)."""
    events = []
    for g in plan.groups:
        failure = g.launch_failure
        if failure is None or not g.launch_backoff:
            continue
        message = (
            f"Scale-up failed for group {g.name}: AWS could not launch {failure.unfilled} instance(s): "
            f"{failure.describe()}"
        )
        if failure.last.message:
            message += f": {failure.last.message}"
        events.append(EventSpec(CONFIGMAP, namespace, name, "", WARNING, FAILED_TO_SCALE_UP_GROUP, message))
    return events


def _drained_node(notes: Iterable[str], instance: str) -> str | None:
    """The node apply's own note names for a terminated instance ("drained N and terminated I")."""
    for note in notes:
        match = _DRAINED.match(note)
        if match is not None and match.group(2) == instance:
            return match.group(1)
    return None


def apply_events(
    report: ApplyReport,
    node_of: Mapping[str, str] | None = None,
    *,
    node_uids: Mapping[str, str] | None = None,
) -> list[EventSpec]:
    """Events for one apply run: a ScaleDown per node whose instance it terminated, a
    ScaleDownGivenBack per drain taint it gave back (Warning when it could not). `node_of`: instance
    id -> node name (the run's inventory); without it, apply's note "drained N and terminated I"
    names the node. A dry run changed nothing and tells nothing."""
    if report.dry_run:
        return []
    node_of, node_uids = node_of or {}, node_uids or {}
    commit = f", commit {report.commit[:12]}" if report.commit else ""
    events: list[EventSpec] = []
    for group in report.groups:
        for instance in group.terminated:
            node = node_of.get(instance) or _drained_node(group.notes, instance)
            if not node:
                continue
            message = (
                f"node removed by asg-reconciler: drained, instance {instance} terminated "
                f"(node group {group.name}{commit})"
            )
            uid = node_uids.get(node) or node
            events.append(EventSpec(NODE, "", node, uid, NORMAL, SCALE_DOWN, message))
    for line in report.given_back:
        node, sep, rest = line.partition(": ")
        if sep and rest.startswith("given back ("):
            detail = rest.removeprefix("given back ")
            message = f"removed {OWN_DRAIN_TAINT} taint from node {node} {detail}"
            uid = node_uids.get(node) or node
            events.append(EventSpec(NODE, "", node, uid, NORMAL, SCALE_DOWN_GIVEN_BACK, message))
    for line in report.stuck:
        node, sep, rest = line.partition(": ")
        if sep and rest.startswith("still carries the drain taint"):
            detail = rest.removeprefix("still carries the drain taint").strip()
            message = f"failed to remove {OWN_DRAIN_TAINT} taint from node {node}: {detail}"
            uid = node_uids.get(node) or node
            events.append(EventSpec(NODE, "", node, uid, WARNING, SCALE_DOWN_GIVEN_BACK, message))
    return events
