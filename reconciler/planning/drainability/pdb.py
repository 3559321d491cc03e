"""PodDisruptionBudgets, counted per plan: not a per-pod rule, since their allowed disruptions are
shared by every node removed in one plan (CA's remaining-PDB tracker)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reconciler.domain.model import Pod, PodDisruptionBudget
from reconciler.planning.selectors import label_selector_matches


class PdbBudget:
    """Disruptions each PDB still allows in this plan. Every node the plan removes takes one per
    matching pod it evicts, so two nodes cannot both spend a budget of one (CA's remaining-PDB tracker).

    As CA: a node is refused when a PDB matching one of its pods has less than one disruption left;
    several matching pods on one node are allowed with one left (the drain evicts them one at a time,
    each waiting for its replacement), and the budget may then go negative, refusing later nodes.
    """

    __slots__ = ("_by_namespace", "_memo", "initial", "remaining")

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in sorted(pdbs, key=lambda p: p.key):
            by_namespace.setdefault(pdb.namespace, []).append(pdb)
        self._by_namespace = {ns: tuple(items) for ns, items in by_namespace.items()}
        self.initial: dict[str, int] = {
            p.key: p.disruptions_allowed for items in self._by_namespace.values() for p in items
        }
        self.remaining: dict[str, int] = dict(self.initial)
        # (namespace, id(labels)) -> (labels, matching PDB keys): readers share label maps per
        # controller; the memo holds the map so its id stays unique.
        self._memo: dict[tuple[str, int], tuple[Mapping[str, str], tuple[str, ...]]] = {}

    def matching(self, pod: Pod) -> tuple[str, ...]:
        """Keys of the PDBs selecting `pod` (same namespace, selector matches its labels)."""
        candidates = self._by_namespace.get(pod.namespace)
        if not candidates:
            return ()
        labels = pod.labels
        marker = (pod.namespace, id(labels))
        hit = self._memo.get(marker)
        if hit is not None and hit[0] is labels:
            return hit[1]
        keys = tuple(p.key for p in candidates if label_selector_matches(p.selector, labels))
        self._memo[marker] = (labels, keys)
        return keys

    def has_pdb(self, pod: Pod) -> bool:
        return bool(self.matching(pod))

    def blocking(self, pods: Sequence[Pod]) -> str | None:
        """Why evicting `pods` is refused now, or None."""
        for pod in pods:
            for key in self.matching(pod):
                if self.remaining[key] < 1:
                    if self.initial[key] < 1:
                        return f"pdb {key} allows no disruption (pod {pod.key})"
                    return f"pdb {key} has no disruption left after other removals (pod {pod.key})"
        return None

    def take(self, pods: Iterable[Pod]) -> None:
        """Spend one disruption per matching pod: the node is being removed."""
        for pod in pods:
            for key in self.matching(pod):
                self.remaining[key] -= 1
