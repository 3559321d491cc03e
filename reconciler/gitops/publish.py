"""Turn a plan into Git: scale-ups on main, scale-downs as a proposal branch and pull request, and the
planner's memory on the state branch. The imperative shell around `plan_edits`.

Main is never force-pushed: a rejected push fetches, re-plans on the new main and retries
(`WorkingCopy.update`). The proposal branch is rewritten (force-with-lease) only while it holds
nothing but the bot's commits and no approval; after that the bot may only shrink it or close it
(DESIGN §3.3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.domain.markdown import BODY_BUDGET, GITHUB_BODY_LIMIT, Part, fenced, fit, inline
from reconciler.gitops.errors import GitError
from reconciler.gitops.forge import Forge, PullRequest, open_or_update
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.plan_edits import listed_removals, main_edits, proposal_draft, restore_note
from reconciler.gitops.repo import PushRejected, Update, WorkingCopy
from reconciler.gitops.state import State, save_state
from reconciler.gitops.trailers import CapacityMessage, Change, Reason, build_message
from reconciler.planning.types import Plan


def proposal_branch(cluster: str) -> str:
    return f"asg-reconciler/{cluster}/scale-down"


def review_branch(cluster: str) -> str:
    """Where scale-ups wait for a person when `scaleUp.review` is on."""
    return f"asg-reconciler/{cluster}/scale-up"


@dataclass(frozen=True)
class Published:
    plan: Plan  # what was written: the plan re-made on main when main moved under us
    main_commit: str | None = None
    proposal_commit: str | None = None
    proposal: PullRequest | None = None
    proposal_action: str = "none"  # none | opened | updated | unchanged | shrunk | closed | kept | conflict
    state_commit: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # what the plan refused to write, each with its way out (a proposal a person broke): exit 3
    refused: tuple[str, ...] = ()


Replan = Callable[[str | None], Plan]


def publish(
    plan: Plan,
    planned_on: str | None,
    replan: Replan,
    copy: WorkingCopy,
    forge: Forge,
    config: Config,
    *,
    pushed: Callable[[str], None] = lambda commit: None,
) -> Published:
    """Write `plan` (computed on main's manifest text `planned_on`); `replan(text)` plans again when
    main moved under us. `pushed(commit)` is told at once when main was pushed (the `run` loop wakes
    apply with it), before the proposal and the state are written."""
    path, branch = config.manifest_path, config.git.branch
    latest = {"plan": plan}
    restored: list[Change] = []

    def change(current: str | None) -> Update | None:
        chosen = plan if current == planned_on else replan(current)
        latest["plan"] = chosen
        edited = main_edits(chosen, current, f"{branch}:{path}")
        restored[:] = edited.restores if edited is not None else ()
        return None if edited is None else Update(edited.text, edited.message)

    notes: list[str] = []
    # Read before anything is pushed: a proposal that cannot be read is refused whole, never found
    # out halfway through (main pushed, the state not saved), and never a reason to stop the rest.
    broken = proposal_problem(copy, config)
    if config.scale_up.review:
        main_commit = None
        _publish_for_review(plan, planned_on, copy, forge, config, notes)
    else:
        main_commit = copy.update(branch, path, change)
        plan = latest["plan"]
        if main_commit:
            pushed(main_commit)
    main_text = copy.read_file(path, branch)
    if main_commit:
        notes.append(f"committed {main_commit[:12]} to {branch}")
        notes += [restore_note(c, branch) for c in restored]
    # the state before the proposal: a proposal the forge or a racing push refuses loses no memory
    state_commit = save_state(copy, config.cluster, _state(plan))
    if state_commit:
        notes.append(f"state saved on asg-reconciler/{config.cluster}/state ({state_commit[:12]})")
    refused: list[str] = []
    proposal = _publish_proposal(plan, main_text, copy, forge, config, notes, broken, refused)
    return Published(
        plan,
        main_commit,
        proposal[0],
        proposal[1],
        proposal[2],
        state_commit,
        tuple(notes),
        tuple(refused),
    )


def _short_name(branch: str, cluster: str) -> str:
    """The PROPOSAL argument `approve` takes for this cluster's branch."""
    return "scale-down" if branch == proposal_branch(cluster) else branch


def proposal_problem(copy: WorkingCopy, config: Config) -> str | None:
    """Why the scale-down proposal branch cannot be read (its manifest is not valid), or None."""
    branch = proposal_branch(config.cluster)
    if copy.head(branch) is None:
        return None
    try:
        listed_removals(copy.read_file(config.manifest_path, branch), f"{branch}:{config.manifest_path}")
    except UserError as exc:
        return str(exc)
    return None


def way_out_of_a_broken_proposal(branch: str) -> str:
    """The commands that unjam a proposal the bot may not rewrite."""
    return (
        f"fix it on the branch (the error names the line), or drop it: git push origin --delete {branch} "
        "(the next plan proposes again from main)"
    )


def _publish_for_review(
    plan: Plan, main_text: str | None, copy: WorkingCopy, forge: Forge, config: Config, notes: list[str]
) -> None:
    """`scaleUp.review`: what would be committed to main goes to its own branch and pull request,
    rewritten while it is the bot's alone, closed when no longer needed."""
    path, base = config.manifest_path, config.git.branch
    branch = review_branch(config.cluster)
    edited = main_edits(plan, main_text, f"{branch}:{path}")
    head = copy.head(branch)
    pr = forge.find_open(branch) if head else None
    if edited is None:
        if head is not None:
            if pr is not None:
                forge.close(pr, "asg-reconciler closed this pull request: main already has what it proposed.")
            copy.delete_branch(branch, head)
            notes.append(f"scale-up {branch} closed: no longer needed")
        return
    if head is not None and copy.read_file(path, branch) == edited.text:
        return  # unchanged: no push, no edit
    if head is not None and _locked_reason(copy, forge, pr, branch, base, head, config) is not None:
        notes.append(f"scale-up {branch} kept as is: a person has reviewed or changed it")
        return
    forge.ready()  # before the push: never a branch whose pull request cannot be opened
    sha = copy.commit(copy.head(base), {path: edited.text}, edited.message)
    assert sha is not None
    if head is None:
        copy.force_push(sha, branch, expected=None)
    else:
        _lease_push(copy, sha, branch, head)
    title = edited.message.splitlines()[0]
    pr = open_or_update(forge, title=title, body=_review_body(edited.message), head=branch, base=base)
    notes.append(f"scale-up {branch}: {pr.message or pr.url}")


def _review_body(message: str) -> str:
    """The scale-up pull request's text: the commit message in a block no line of it can close,
    cut to what GitHub accepts (a line per group: 10,000 groups would not fit)."""
    block = fenced(message, info="")
    summary = (
        f"**This description is shortened** to fit GitHub's limit of {GITHUB_BODY_LIMIT:,} characters: "
        "the whole message is this branch's commit message."
    )
    head = ["Scale-up proposed by asg-reconciler (`scaleUp.review` is on).", ""]
    return fit(
        head, [Part(block[1:-1], "lines of the commit message", block[:1], block[-1:])], BODY_BUDGET, summary
    )


def _state(plan: Plan) -> State:
    return State(
        since=dict(plan.memory.unneeded_since),
        backoffs=dict(plan.memory.backoffs),
    )


def _publish_proposal(
    plan: Plan,
    main_text: str | None,
    copy: WorkingCopy,
    forge: Forge,
    config: Config,
    notes: list[str],
    broken: str | None = None,
    refused: list[str] | None = None,
) -> tuple[str | None, PullRequest | None, str]:
    cluster, path, base = config.cluster, config.manifest_path, config.git.branch
    branch = proposal_branch(cluster)
    label = f"{branch}:{path}"
    draft = proposal_draft(plan, main_text, label, branch) if main_text is not None else None
    head = copy.head(branch)
    main_head = copy.head(base)
    if head is not None and main_head is not None and copy.is_ancestor(head, main_head):
        # Spent: merged into main already (and maybe reverted there, or withdrawn by the plan as a
        # merge apply refuses). It can propose nothing more: delete it, and propose afresh below.
        _delete_proposal(copy, branch, head)
        notes.append(
            f"proposal {branch} ({head[:12]}) was already merged into {base}: deleted, so a new "
            "proposal can be opened"
        )
        head, broken = None, None
    existing_text = copy.read_file(path, branch) if head else None
    pr = forge.find_open(branch) if head else None
    if head is not None and broken is not None:
        locked = _locked_reason(copy, forge, pr, branch, base, head, config)
        if locked is not None:  # a person's work: never rewritten, never half-read
            said = (
                f"proposal {branch} refused: {broken}; {locked}, so the bot leaves it as it is and "
                f"proposes nothing new meanwhile: {way_out_of_a_broken_proposal(branch)}"
            )
            notes.append(said)
            if refused is not None:
                refused.append(said)
            return head, pr, "refused"
        existing_text = None  # the bot's own and unreadable: rebuilt from main, or closed, below
    if head is None:
        if draft is None:
            return None, None, "none"
        forge.ready()  # before the push: never a branch whose pull request cannot be opened
        sha = copy.commit(copy.head(base), {path: draft.text}, draft.message)
        assert sha is not None
        copy.force_push(sha, branch, expected=None)
        pr = open_or_update(forge, title=draft.title, body=draft.body, head=branch, base=base)
        notes.append(f"proposal {branch}: {pr.message or pr.url}")
        if config.approval.mode == "signed":
            notes.append(
                f"approve it with `asg-reconciler approve {_short_name(branch, cluster)}`, not a merge button"
            )
        return sha, pr, "opened"

    current = _proposed(existing_text, main_text, label)
    wanted = draft.removals if draft is not None else {}
    mergeable = main_head is None or copy.merges_cleanly(main_head, head)
    if current == wanted and mergeable and existing_text is not None:
        return head, pr, "unchanged"  # low noise: no push, no PR edit
    locked = _locked_reason(copy, forge, pr, branch, base, head, config)
    if current == wanted and locked is not None and existing_text is not None:
        notes.append(f"proposal {branch} conflicts with {base} and {locked}: a person must resolve it")
        return head, pr, "conflict"
    if not wanted:
        return None, _close(copy, forge, pr, branch, head, plan, notes), "closed"
    if locked is None:
        assert draft is not None
        forge.ready()
        sha = copy.commit(copy.head(base), {path: draft.text}, draft.message)
        assert sha is not None
        _lease_push(copy, sha, branch, head)
        pr = open_or_update(forge, title=draft.title, body=draft.body, head=branch, base=base)
        notes.append(f"proposal {branch} updated: {pr.message or pr.url}")
        return sha, pr, "updated"
    # Approved or touched by a person: only shrink (rule 3), never add.
    keep = {g: tuple(i for i in ids if i in set(wanted.get(g, ()))) for g, ids in current.items()}
    if keep == current:
        notes.append(
            f"proposal {branch} kept as is ({locked}); new candidates wait for it to be merged or closed"
        )
        return head, pr, "kept"
    if not any(keep.values()):
        return None, _close(copy, forge, pr, branch, head, plan, notes), "closed"
    sha = _shrink(copy, existing_text, main_text, label, keep, head, branch, cluster, path)
    notes.append(f"proposal {branch} shrunk ({locked}): {sum(map(len, keep.values()))} instance(s) left")
    if pr is not None:
        forge.comment(pr, "asg-reconciler shrank this proposal: some instances are no longer safe to remove.")
    return sha, pr, "shrunk"


def _proposed(existing: str | None, main_text: str | None, label: str) -> dict[str, tuple[str, ...]]:
    """The removals the proposal adds on top of what main already lists."""
    ours = listed_removals(existing, label)
    on_main = listed_removals(main_text, label)
    proposed = {g: tuple(i for i in ids if i not in set(on_main.get(g, ()))) for g, ids in ours.items()}
    return {g: ids for g, ids in proposed.items() if ids}


def _locked_reason(
    copy: WorkingCopy,
    forge: Forge,
    pr: PullRequest | None,
    branch: str,
    base: str,
    head: str,
    config: Config,
) -> str | None:
    """Why the bot may no longer rewrite the proposal, or None while it is the bot's alone.

    An approval locks it while it stands, on whichever commit it was given: the bot's own shrink
    moves the head past a person's approval, and the set they approved may still only shrink
    (DESIGN §3 rule 3). An approval whose reviewer's permission could not be read locks too."""
    people = copy.commits_not_by(branch, base, config.git.author_email)
    if people:
        return f"it has commits by {people[0].author_name}"
    ignore = config.approval.ignore_reviewers
    if pr is not None and forge.opens_pull_requests and forge.reviews(pr, head, ignore=ignore).locks:
        return "it has approvals"
    return None


def _lease_push(copy: WorkingCopy, sha: str, branch: str, expected: str) -> None:
    try:
        copy.force_push(sha, branch, expected=expected)
    except PushRejected:
        raise GitError(
            f"the proposal branch {branch} moved while we rewrote it (someone pushed): not overwritten; "
            "the next plan looks again"
        ) from None


def _shrink(
    copy: WorkingCopy,
    existing_text: str | None,
    main_text: str | None,
    label: str,
    keep: Mapping[str, tuple[str, ...]],
    head: str,
    branch: str,
    cluster: str,
    path: str,
) -> str:
    """A commit on top of the proposal (never a rewrite) dropping the instances not in `keep`;
    what main already lists stays."""
    assert existing_text is not None
    on_main = listed_removals(main_text, label)
    editor = ManifestEditor(existing_text, label)
    for group in listed_removals(existing_text, label):
        editor.shrink_removals(group, set(on_main.get(group, ())) | set(keep.get(group, ())))
    message = CapacityMessage(
        cluster=cluster,
        summary="shrink the scale-down proposal",
        reasons=(Reason("", "instances no longer safe to remove were dropped"),),
        proposal=branch,
    )
    sha = copy.commit(head, {path: editor.render()}, build_message(message))
    assert sha is not None
    try:
        copy.push(sha, branch)
    except PushRejected:
        raise GitError(
            f"the proposal branch {branch} moved while we shrank it: the next plan looks again"
        ) from None
    return sha


def _close(
    copy: WorkingCopy,
    forge: Forge,
    pr: PullRequest | None,
    branch: str,
    head: str,
    plan: Plan,
    notes: list[str],
) -> PullRequest | None:
    why = _why_closed(plan)
    if pr is not None:
        # escaped: node names and reasons are the cluster's text (a pod's name), not ours
        pr = forge.close(pr, f"asg-reconciler closed this proposal: it is no longer valid ({inline(why)}).")
    _delete_proposal(copy, branch, head)
    notes.append(f"proposal {branch} closed: {why}")
    return pr


def _why_closed(plan: Plan) -> str:
    reasons = [f"{u.node}: {u.reason}" for u in plan.unremovable[:3]]
    return "; ".join(reasons) or "the nodes are needed again"


def _delete_proposal(copy: WorkingCopy, branch: str, head: str) -> None:
    """Delete the proposal branch only where it still is at `head` (a person may have pushed since)."""
    try:
        copy.delete_branch(branch, head)
    except PushRejected:
        raise GitError(
            f"the proposal branch {branch} moved while we deleted it: the next plan looks again"
        ) from None
