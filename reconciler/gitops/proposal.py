"""The open scale-down proposal as readers see it (`status`, the `run` loop's metrics and status
ConfigMap): which instances it names and since when it has waited for a person."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import git

from reconciler.domain.errors import UserError
from reconciler.gitops.plan_edits import listed_removals
from reconciler.gitops.publish import proposal_branch
from reconciler.gitops.repo import WorkingCopy


@dataclass(frozen=True)
class OpenProposal:
    branch: str
    commit: str
    removals: dict[str, tuple[str, ...]]  # group -> instances it would remove
    opened_at: datetime  # the first commit of the branch not on main: when the wait began

    def age_seconds(self, now: datetime) -> float:
        return max(0.0, (now - self.opened_at).total_seconds())


def open_proposal(copy: WorkingCopy, cluster: str, main: str, manifest_path: str) -> OpenProposal | None:
    """The proposal branch of `cluster` as last fetched, or None when there is none (or it names
    nothing: a proposal with no removals is not waiting for anyone)."""
    branch = proposal_branch(cluster)
    commit = copy.head(branch)
    if commit is None:
        return None
    tip = copy.head(main)
    if tip is not None and copy.is_ancestor(commit, tip):
        return None  # merged already: it waits for nobody (the next plan deletes it)
    try:
        removals = listed_removals(copy.read_file(manifest_path, branch), branch)
        on_main = listed_removals(copy.read_file(manifest_path, main), main) if tip is not None else {}
    except UserError:
        removals, on_main = {}, {}  # unreadable: shown as a proposal naming nothing it can tell
    # what it adds: the instances main already lists are approved (or refused) there, not proposed
    removals = {g: tuple(i for i in ids if i not in on_main.get(g, ())) for g, ids in removals.items()}
    removals = {g: ids for g, ids in removals.items() if ids}
    own = copy.first_parent(branch, since=copy.head(main))  # newest first
    first = own[-1] if own else commit
    opened = git.Repo(copy.path).commit(first).committed_datetime.astimezone(UTC)
    return OpenProposal(branch, commit, removals, opened)
