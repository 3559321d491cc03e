"""Manifest groups that are no node group of the cluster: said by `plan` and `status` before apply.

Apply refuses such a group on every run (exit 3, "not a node group of cluster ..."); a typo
(`demo-gpuu`) or an ASG that lost its discovery tags should be found when the plan is read, not
when apply first fails. Discovery that found no group at all is said once, elsewhere, instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection


def not_node_groups(
    manifest_groups: Collection[str], found: Collection[str], cluster: str, where: str
) -> list[str]:
    """One warning per group of the manifest at `where` that no discovered ASG is called."""
    if not found:
        return []
    known = sorted(found)
    warnings = []
    for name in sorted(set(manifest_groups) - set(found)):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(
            f"{where}: group {name} is not a node group of cluster {cluster}{guess}: no ASG of that name "
            "matches nodeGroups (autoDiscovery tags or explicit), so every apply refuses it (exit 3); "
            "remove it from the manifest, or fix nodeGroups discovery (tag the ASG, or list it in "
            "nodeGroups.explicit)"
        )
    return warnings
