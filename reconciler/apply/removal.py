"""Removing approved instances, in batches of `apply.maxParallelDrains` (DESIGN §3 rules 2, 5, 6).

The order for each batch closes the races an unattended apply meets:
  0. every scale-down window closed since the run started (scaleDown.windows): the batch and every
     later one of the run wait, still approved (not a refusal);
  1. taint the nodes (checking, on the same guarded read, that each still is the approved instance),
     so nothing new is scheduled onto them from here on;
  2. observe the cluster again and re-run the planner on that state (rule 5), so the verdict is newer
     than the taint and than every earlier drain of this run; a node that fails is given back;
  3. drain, in parallel; a pod the re-check did not see (it arrived after) stops the drain before
     it is evicted, and so does the node no longer being the approved instance;
  4. one at a time, right before terminating: nothing left on the node, the node still the approved
     instance, the intent recorded (write-ahead, so a rerun can tell its own half-done work from
     someone else's), the Lease ours.
Anything that goes wrong after the taint gives the node back; so does an interruption (SIGTERM).
A lost Lease does not: it stops everything where it stands (the node is the new holder's now).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.outcome import GroupRun
from reconciler.apply.recheck import approved_verdicts
from reconciler.apply.window_gate import closed_since_start
from reconciler.domain.errors import (
    OperationError,
    ReconcilerError,
    RefusalKind,
    RefusedError,
    StopRequested,
    UncertainError,
)
from reconciler.domain.inventory import GroupInventory, Inventory
from reconciler.domain.model import NodeGroup
from reconciler.gitops.plan_edits import committed_groups
from reconciler.kube.lease import LeaseLost
from reconciler.kube.parse import ObjectReader
from reconciler.planning.drainability import BLOCKS, DrainContext, PdbBudget, drain_verdict

IN_SERVICE = "InService"


@dataclass
class Removal:
    """One approved instance on its way out, across the steps of its batch."""

    run: GroupRun
    group: NodeGroup
    instance: str
    node: str | None
    marked: bool = False
    known_pods: frozenset[str] = frozenset()  # uids on the node when the re-check judged it
    done: bool = False  # refused, failed or terminated: nothing more to do
    calling: bool = False  # the terminate call was made: the node may be going away

    def refuse(self, why: str, kind: RefusalKind) -> None:
        self.run.refuse(f"{self.instance}: {why}", kind)
        self.done = True

    def fail(self, why: str) -> None:
        self.run.fail(f"{self.instance}: {why}")
        self.done = True

    def wait(self, why: str) -> None:
        """Held back by scaleDown.windows before anything was done to it: still approved."""
        self.run.wait(self.instance, why)
        self.done = True


def remove_all(
    inputs: ApplyInputs,
    removals: Sequence[Removal],
    effects: Effects,
    terminated_nodes: set[str],
    in_flight: list[str],
) -> None:
    """`terminated_nodes` gets the nodes whose instance this run terminated (they keep the taint);
    `in_flight`, on an interruption, the instances whose terminate call was made but not answered."""
    stopping = threading.Event()

    def guard(group: str) -> None:
        if stopping.is_set():
            raise OperationError("apply is stopping (interrupted)")
        effects.guard(group)

    watched = replace(effects, guard=guard)
    size = inputs.config.apply.max_parallel_drains
    closed = ""
    for start in range(0, len(removals), size):
        batch = list(removals[start : start + size])
        if effects.stopping(math.inf):  # the run loop is stopping: no new batch is tainted
            raise StopRequested
        # scaleDown.windows: no batch starts after they all closed, nor any later one of this run
        closed = closed or closed_since_start(inputs.config.scale_down.windows, effects.clock())
        if closed:
            for removal in batch:
                removal.wait(closed)
            continue
        try:
            _remove_batch(inputs, batch, watched, terminated_nodes, stopping)
        except LeaseLost:
            stopping.set()  # no give-back: a write, and the node may carry the new holder's taint
            raise
        except BaseException:
            stopping.set()
            for removal in batch:  # interrupted (SIGTERM, Ctrl-C): what was marked goes back
                if removal.calling and not removal.done:
                    in_flight.append(removal.instance)
                    removal.fail("interrupted while terminating it: the next apply finds out whether it went")
                elif removal.marked and not removal.done:
                    removal.fail(f"interrupted{_give_back(effects, removal)}")
            raise


def _remove_batch(
    inputs: ApplyInputs,
    batch: list[Removal],
    effects: Effects,
    terminated_nodes: set[str],
    stopping: threading.Event,
) -> None:
    # 1. taint: from here on nothing new is scheduled onto these nodes
    for removal in batch:
        if removal.node is None:
            continue
        try:
            effects.guard(removal.run.name)
            effects.drainer.mark(removal.node, inputs.commit, instance=removal.instance)
            removal.marked = True
        except RefusedError as exc:
            removal.refuse(str(exc), exc.kind)
        except ReconcilerError as exc:
            removal.fail(f"{exc}{_give_back(effects, removal)}")
    # 2. the re-check on state observed after the taints (and after every earlier drain of this run)
    _recheck_fresh(inputs, [r for r in batch if not r.done], effects)
    # 3. drain, in parallel (bounded by the batch, apply.maxParallelDrains)
    draining = [r for r in batch if not r.done and r.node is not None]
    if len(draining) == 1:
        _drain(inputs, draining[0], effects)
    elif draining:
        pool = ThreadPoolExecutor(max_workers=len(draining), thread_name_prefix="drain")
        try:
            for future in [pool.submit(_drain, inputs, r, effects) for r in draining]:
                future.result()
        except BaseException:
            stopping.set()  # the drains stop at their next look and give their nodes back
            raise
        finally:
            pool.shutdown(wait=True)
    # 4. terminate, one at a time
    for removal in batch:
        if not removal.done:
            _terminate(removal, effects, terminated_nodes)


def _recheck_fresh(inputs: ApplyInputs, batch: list[Removal], effects: Effects) -> None:
    if not batch:
        return
    if effects.observe is None:
        raise OperationError("apply needs a way to observe the cluster again before draining")
    try:
        fresh = effects.observe()
    except ReconcilerError as exc:
        for removal in batch:
            removal.fail(
                f"could not observe the cluster again before draining: {exc}{_give_back(effects, removal)}"
            )
        return
    committed = committed_groups(inputs.manifest)
    groups = {g.name: g for g in fresh.groups}
    verdicts = approved_verdicts(
        inputs.config, inputs.now, fresh, committed, only=[r.instance for r in batch]
    )
    for removal in batch:
        problem = _fresh_problem(fresh, groups, removal, verdicts)
        if problem is not None:
            kind, why = problem
            removal.refuse(f"{why}{_give_back(effects, removal)}", kind)
            continue
        if removal.node is not None:
            removal.known_pods = frozenset(p.uid or p.key for p in fresh.pods_by_node.get(removal.node, ()))


def _fresh_problem(
    fresh: Inventory,
    groups: Mapping[str, GroupInventory],
    removal: Removal,
    verdicts: Mapping[str, str | None],
) -> tuple[RefusalKind, str] | None:
    """What, seen again after the taints, refuses the removal now (its kind, why); None: nothing."""
    inventory = groups.get(removal.group.name)
    if inventory is None:
        return "group-settings", f"asg {removal.group.name} is no longer a node group of the cluster"
    state = next(
        (i.lifecycle_state for i in inventory.group.instances if i.instance_id == removal.instance), ""
    )
    if state != IN_SERVICE:
        return (
            "instance-changed",
            f"is {state or 'no longer in the group'} now; only in-service instances are drained",
        )
    node = next((n.name for n in inventory.nodes if n.instance_id == removal.instance), None)
    if node != removal.node:
        now = f"node {node}" if node else "no node"
        then = removal.node or "no node"
        return (
            "instance-changed",
            f"its node changed since it was judged ({then} then, {now} now); not removed this run",
        )
    if removal.instance not in verdicts:
        return "not-approved", "no longer an approved removal in its ASG"
    verdict = verdicts[removal.instance]
    return ("busy", f"no longer safe to remove (re-checked after tainting): {verdict}") if verdict else None


def _drain(inputs: ApplyInputs, removal: Removal, effects: Effects) -> None:
    assert removal.node is not None
    late = _LatePods(inputs, removal.known_pods)
    # a drain ends by its timeout: if the run loop is stopped, it goes on only when that is within
    # the grace period; otherwise it stops at its next look and the node is given back
    ends_by = time.monotonic() + inputs.config.apply.drain_timeout.total_seconds()

    def check() -> None:
        if effects.stopping(ends_by):
            raise StopRequested
        effects.guard(removal.run.name)

    try:
        result = effects.drainer.drain(removal.node, vet=late.vet, check=check, instance=removal.instance)
        if not result.complete:
            if late.refusal is not None:  # a safety rule, not a failure
                raise RefusedError(f"drain of {removal.node} stopped: {late.refusal}", kind="busy")
            raise OperationError(f"drain of {removal.node} did not finish: {result.reason}")
    except RefusedError as exc:
        removal.refuse(f"{exc}{_give_back(effects, removal)}", exc.kind)
    except ReconcilerError as exc:
        removal.fail(f"{exc}{_give_back(effects, removal)}")


def _terminate(removal: Removal, effects: Effects, terminated_nodes: set[str]) -> None:
    """The intent first (a Git push, seconds), then the last look at the node, then the call: a pod
    that lands while the intent is written is still seen."""
    run, node = removal.run, removal.node
    try:
        effects.guard(run.name)
        effects.intend(run.name, removal.instance, run.after, run.after - 1)
        if node is not None:
            left = effects.drainer.remaining(node)
            if left:
                names = ", ".join(_pod_name(p) for p in left[:5])
                raise RefusedError(
                    f"not terminated: pods landed on {node} after its drain ({names})", kind="busy"
                )
            owner = effects.drainer.instance_of(node)
            if owner is not None and owner != removal.instance:
                raise RefusedError(
                    f"not terminated: node {node} now belongs to {owner or 'no instance'}",
                    kind="instance-changed",
                )
        effects.guard(run.name)
        removal.calling = True  # from here the node may be going away: never given back
        if node is not None:
            terminated_nodes.add(node)
        effects.actuator.terminate(run.name, removal.instance)
    except UncertainError as exc:
        removal.fail(f"{exc}; node {node} keeps the drain taint meanwhile" if node else str(exc))
        return
    except ReconcilerError as exc:
        removal.calling = False
        if node is not None:
            terminated_nodes.discard(node)
        back = _give_back(effects, removal)
        if isinstance(exc, RefusedError):
            removal.refuse(f"{exc}{back}", exc.kind)
        else:
            removal.fail(f"{exc}{back}")
        return
    removal.done = True
    instance = removal.instance
    run.terminated_one(
        instance, f"drained {node} and terminated {instance}" if node else f"terminated {instance} (no node)"
    )


def _give_back(effects: Effects, removal: Removal) -> str:
    """Take our taint off a node whose removal did not happen, so it serves again."""
    if not removal.marked or removal.node is None:
        return ""
    if effects.going_away(removal.instance):  # AWS took it meanwhile: its machine is dying
        return f"; node {removal.node} keeps the drain taint: its instance is going away"
    removal.marked = False
    try:
        effects.drainer.unmark(removal.node)
    except ReconcilerError as exc:
        return f"; node {removal.node} still carries the drain taint ({exc}): the next apply gives it back"
    return f"; node {removal.node} given back"


def _pod_name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class _LatePods:
    """What a drain may evict: only pods the fresh re-check saw on the node (a pod that arrived after
    it was never judged: it stops the drain before it is evicted), and none that the drain rules
    forbid now (an annotation such as safe-to-evict: "false" added after the re-check)."""

    def __init__(self, inputs: ApplyInputs, known: frozenset[str]) -> None:
        self.reader = ObjectReader()
        self.known = known
        pdbs = PdbBudget(inputs.inventory.state.pdbs)
        config = inputs.config
        self.context = DrainContext(
            config.scale_down, inputs.now, pdbs.has_pdb, config.scale_up.expendable_priority_cutoff
        )
        self.refusal: str | None = None

    def vet(self, raw_pods: Sequence[Mapping[str, Any]]) -> str | None:
        for raw in raw_pods:
            pod = self.reader.pod(raw)
            if (pod.uid or pod.key) not in self.known:
                self.refusal = f"pod {pod.key} arrived after the re-check (the next apply judges it)"
                return self.refusal
            verdict = drain_verdict(pod, self.context)
            if verdict.outcome == BLOCKS:
                self.refusal = f"{verdict.reason} (since the re-check)"
                return self.refusal
        return None
