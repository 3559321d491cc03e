"""Is a snapshot whole enough to decide on? Pure: the state read from it and the groups in, a refusal out.

A dump of pods alone (`kubectl get pods -A -o json`) reads as a cluster in which no instance ever
registered: every InService instance looks "unregistered longer than maxNodeProvisionTime", a plan
writes that to the state branch, and removing healthy nodes is the next step. A dump of nodes alone
looks like a cluster with nothing running, so every node looks idle. Neither can be told from a real
cluster by what is in it, only by what is missing, so both are refused before anything is decided.
An empty kubectl List is a real answer (an empty cluster) as long as AWS agrees: no group has an
InService instance that a node should stand for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState, NodeGroup

# The dump the docs tell users to make (README "--snapshot"): every kind the planner reads.
COMPLETE_DUMP = "kubectl get nodes,pods,pdb,daemonsets,pv,pvc,namespaces -A -o json"

IN_SERVICE = "InService"
_NAMED_GROUPS = 3  # groups named in the message; the rest are counted


def require_complete(state: ClusterState, groups: Sequence[NodeGroup], source: str) -> None:
    """Raise a one-line UserError naming `source`, what it lacks and `COMPLETE_DUMP`, when the
    snapshot has no Node object for any of the groups' InService instances (none at all, or only
    nodes of other machines: Fargate, another cluster's context, nodes without a providerID), or no
    Pods while it has Node objects. Pending or terminating instances may have no node yet, so they
    ask nothing."""
    serving = {
        g.name: [i.instance_id for i in g.instances if i.lifecycle_state == IN_SERVICE] for g in groups
    }
    require_complete_for(state, serving, source)


def require_complete_for(state: ClusterState, serving: Mapping[str, Sequence[str]], source: str) -> None:
    """`require_complete` on the groups' InService instance ids alone (group name -> ids), which the
    ASG descriptions give before anything else is asked of AWS: a pods-only dump of a 5,000-instance
    cluster is refused without describing 5,000 instances first."""
    counts = [(name, len(ids)) for name, ids in serving.items() if ids]
    registered = {n.instance_id for n in state.nodes}
    if counts and not any(i in registered for ids in serving.values() for i in ids):
        total = sum(n for _, n in counts)
        what = (
            "no Node objects"
            if not state.nodes
            else f"{len(state.nodes)} Node object(s), none of them for the groups' instances"
        )
        raise UserError(
            f"{source}: {what}, but AWS has {total} InService instance(s) "
            f"({_describe(counts)}): every one would look unregistered; "
            f"dump the whole cluster, from its own kubectl context, with {COMPLETE_DUMP}"
        )
    if state.nodes and not state.pods:
        raise UserError(
            f"{source}: no Pods, but {len(state.nodes)} Node object(s): every node would look idle; "
            f"dump the whole cluster with {COMPLETE_DUMP}"
        )


def _describe(serving: Sequence[tuple[str, int]]) -> str:
    """`general: 3, spot: 2, gpu: 1 and 4 more groups`: short enough for one line at 200 groups."""
    shown = ", ".join(f"{name}: {count}" for name, count in serving[:_NAMED_GROUPS])
    rest = len(serving) - _NAMED_GROUPS
    return f"{shown} and {rest} more group(s)" if rest > 0 else shown
