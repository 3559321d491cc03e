"""Which pods of a node would have to move if it went, and which pods forbid that: cluster-autoscaler's
drainability rules (simulator/drainability/rules), one module per rule under `rules/`, each switchable
by the config flag CA has for it. The interface is `base.py`; a new rule is a new module under
`rules/` plus its place in `RULES`.

A rule looks at one pod and answers "stays" (it does not move: expendable, mirror, DaemonSet, finished
and long-terminating pods), "moves" (decided: it may be evicted), "blocks" (with the reason a person
reads in the plan) or None (no opinion: the next rule decides). The first answer wins, in CA's order,
so `safe-to-evict: "true"` overrides every blocking rule after it. A pod no rule decides about moves.

PodDisruptionBudgets are not a per-pod rule here: their allowed disruptions are shared by every node
removed in one plan, so `PdbBudget` (pdb.py) counts them per plan (as CA's remaining-PDB tracker does).
"""

from __future__ import annotations

from datetime import datetime

from reconciler.domain.model import Pod
from reconciler.planning.drainability.base import (
    BLOCKS,
    MOVES,
    MOVES_OK,
    STAYS,
    STAYS_PUT,
    Drain,
    DrainContext,
    Rule,
)
from reconciler.planning.drainability.pdb import PdbBudget
from reconciler.planning.drainability.rules.daemonset import daemonset
from reconciler.planning.drainability.rules.expendable import expendable
from reconciler.planning.drainability.rules.local_storage import local_storage
from reconciler.planning.drainability.rules.long_terminating import long_terminating
from reconciler.planning.drainability.rules.mirror import mirror
from reconciler.planning.drainability.rules.not_replicated import not_replicated
from reconciler.planning.drainability.rules.not_safe_to_evict import not_safe_to_evict
from reconciler.planning.drainability.rules.safe_to_evict import safe_to_evict
from reconciler.planning.drainability.rules.system_pod import system_pod
from reconciler.planning.drainability.rules.terminal import terminal
from reconciler.planning.simnode import TERMINAL_PHASES

# CA's order (simulator/drainability/rules): mirror and long-terminating pods, finished pods, DaemonSet
# pods, the safe-to-evict override, then the blocking checks. Expendable pods come first: CA never
# shows them to the rules (they are not in its snapshot).
RULES: tuple[Rule, ...] = (
    expendable,
    mirror,
    long_terminating,
    terminal,
    daemonset,
    safe_to_evict,
    not_replicated,
    system_pod,
    not_safe_to_evict,
    local_storage,
)


def drain_verdict(pod: Pod, ctx: DrainContext) -> Drain:
    """The first rule's answer; a pod no rule decides about moves."""
    for rule in RULES:
        verdict = rule(pod, ctx)
        if verdict is not None:
            return verdict
    return MOVES_OK


def stays_on_node(pod: Pod, now: datetime) -> bool:
    """Pods that never need a new home when their node goes, whatever the flags."""
    return pod.is_mirror or pod.is_daemonset or pod.phase in TERMINAL_PHASES or pod.is_long_terminating(now)


__all__ = [
    "BLOCKS",
    "MOVES",
    "MOVES_OK",
    "RULES",
    "STAYS",
    "STAYS_PUT",
    "Drain",
    "DrainContext",
    "PdbBudget",
    "Rule",
    "drain_verdict",
    "stays_on_node",
]
