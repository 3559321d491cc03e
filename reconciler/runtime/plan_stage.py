"""The plan stage, once: read main and the state branch, observe, plan, and (unless dry-run) write.

Shared by `asg-reconciler plan` and the `run` loop, so both do exactly the same thing. Git is read
first: a broken manifest or an unreachable remote stops the run before anything else is touched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType

from reconciler.aws.calls import difference
from reconciler.aws.discovery import nothing_found
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.domain.inventory import Inventory
from reconciler.domain.model import ClusterState
from reconciler.gitops.adopt import (
    Adoption,
    AdoptionEdit,
    adopted_groups,
    adoption,
    adoption_edit,
    left_before,
    newest_record,
)
from reconciler.gitops.branch_check import require_branch
from reconciler.gitops.forge import make_forge
from reconciler.gitops.manifest import Manifest, for_cluster, parse_manifest
from reconciler.gitops.plan_edits import committed_groups, listed_removals
from reconciler.gitops.publish import Published, proposal_branch, publish
from reconciler.gitops.record_reading import Records, last_scale_up
from reconciler.gitops.record_store import read_records
from reconciler.gitops.repo import Update, WorkingCopy
from reconciler.gitops.state import load_state
from reconciler.gitops.withdraw import Withdrawal, refused_by_apply, withdrawal
from reconciler.planning.plan import make_plan
from reconciler.planning.types import CommittedGroup, Plan, PlanInputs, PlannerMemory
from reconciler.runtime.capacity_repo import default_work_dir as default_work_dir
from reconciler.runtime.capacity_repo import working_copy as working_copy
from reconciler.runtime.price_table import load_prices, shipped_prices_region
from reconciler.runtime.unsigned_merges import unsigned_removals
from reconciler.runtime.world import observe


@dataclass(frozen=True)
class PlanRun:
    plan: Plan
    published: Published | None = None
    notes: tuple[str, ...] = ()  # a dry run: what it would write besides the plan (adoptions)
    inventory: Inventory | None = None  # what was observed (the run loop's events name pods by uid)
    aws_calls: Mapping[str, int] = field(default_factory=dict)  # requests per API this plan made
    searched: str = ""  # discovery found no group: where it looked (aws/discovery.py nothing_found)


def read_manifest(text: str | None, label: str, config: Config | None = None) -> Manifest | None:
    """The manifest on main; a broken one is a UserError naming the line (nothing gets written).
    With `config`, one of another cluster is refused too (the manifest a stage acts on; commits of
    the past are read without it, so a mistake mended on main does not stop the gates for ever)."""
    if text is None:
        return None
    manifest = parse_manifest(text, label)
    if config is None:
        return manifest
    return for_cluster(manifest, config.cluster, f"the config ({config.source or 'config'})")


def committed_on_main(config: Config) -> tuple[dict[str, CommittedGroup], str, Records]:
    """The manifest on git.branch as the planner reads it, where it was read from, and the apply
    records on its first-parent line (each group's desired as the last apply left it:
    `last_desired`, given what AWS has now)."""
    copy = working_copy(config)
    require_branch(copy, config.git.branch, config.source or "config")
    label = f"{config.git.branch}:{config.manifest_path}"
    text = copy.read_file(config.manifest_path, config.git.branch)
    records = read_records(copy, config.git.branch)
    return committed_groups(read_manifest(text, label, config)), label, records


def _proposed(copy: WorkingCopy, config: Config) -> frozenset[str]:
    """Instances the open scale-down proposal names, so the planner keeps choosing them."""
    branch = proposal_branch(config.cluster)
    if copy.head(branch) is None:
        return frozenset()
    text = copy.read_file(config.manifest_path, branch)
    try:
        return frozenset(i for ids in listed_removals(text, branch).values() for i in ids)
    except UserError:
        return frozenset()  # a broken proposal only loses its preference; publishing reports it


def plan_once(
    config: Config,
    snapshot: Path | None,
    now: datetime,
    *,
    dry_run: bool,
    guard: Callable[[], None] = lambda: None,
    reader: AwsReader | None = None,
    change: Callable[[Inventory], Inventory] | None = None,
    cluster: Callable[[datetime], ClusterState] | None = None,
    pushed: Callable[[str], None] = lambda commit: None,
    require_groups: bool = False,
) -> PlanRun:
    """`guard` runs right before each write (the run loop's: still the leader?); raising stops the
    plan with nothing written, so a deposed leader never publishes what it decided as leader.
    `reader`: the run loop's, which reuses ASG descriptions between cycles; else a fresh one.
    `change`: `what-if`'s, the observed cluster as it would be with a workload change (its pods
    pending); a dry run only, so a cluster that does not exist is never written to Git.
    `cluster`: the run loop's watch-fed cache (kube/cache.py); else the cluster is read live.
    `pushed(commit)`: told as soon as the plan is pushed to git.branch (the run loop wakes apply).
    `require_groups`: a discovery that finds no group is a UserError naming where it looked, before
    anything is written (one-shot `plan`: exit 2); otherwise the plan says so in a warning (`run`)."""
    if change is not None and not dry_run:
        raise ValueError("a changed cluster is planned as a dry run only")
    reader = reader or AwsReader(config)
    before = reader.counter.snapshot()
    looked = _Looked(config, reader, require_groups)
    run = _plan_once(
        config,
        snapshot,
        now,
        dry_run=dry_run,
        guard=guard,
        reader=reader,
        change=change,
        cluster=cluster,
        pushed=pushed,
        looked=looked,
    )
    return replace(run, aws_calls=difference(reader.counter.snapshot(), before), searched=looked.text)


class _Looked:
    """Where discovery looked, once it found no group: a UserError for one-shot commands (raised
    before any write), else kept for the plan's warning and the run loop's log."""

    def __init__(self, config: Config, reader: AwsReader, required: bool) -> None:
        self.config, self.reader, self.required = config, reader, required
        self.text = ""

    def check(self, inventory: Inventory) -> str:
        if inventory.groups:
            return ""
        self.text = nothing_found(self.config, self.reader.region)
        if self.required:
            raise UserError(f"{self.config.source or 'config'}: nodeGroups: {self.text}")
        return self.text


def _plan_once(
    config: Config,
    snapshot: Path | None,
    now: datetime,
    *,
    dry_run: bool,
    guard: Callable[[], None],
    reader: AwsReader,
    change: Callable[[Inventory], Inventory] | None = None,
    cluster: Callable[[datetime], ClusterState] | None = None,
    pushed: Callable[[str], None] = lambda commit: None,
    looked: _Looked | None = None,
) -> PlanRun:
    changed = change or (lambda observed: observed)
    if not config.git.url:
        if not dry_run:
            raise UserError(
                f"{config.source or 'config'}: git.url: required to write plans (set it, or pass --dry-run)"
            )
        inventory = changed(observe(config, snapshot, now, reader, cluster=cluster))
        searched = looked.check(inventory) if looked is not None else ""
        inputs, plan = checked_plan(
            PlanInputs(inventory=inventory, config=config, now=now, searched=searched), reader
        )
        return PlanRun(plan, inventory=inputs.inventory)

    copy = working_copy(config)
    require_branch(copy, config.git.branch, config.source or "config")  # a typo never starts a history
    label = f"{config.git.branch}:{config.manifest_path}"
    text = copy.read_file(config.manifest_path, config.git.branch)
    manifest = read_manifest(text, label, config)
    state = load_state(copy, config.cluster)
    records = read_records(copy, config.git.branch)
    memory = PlannerMemory(
        unneeded_since=dict(state.since),
        backoffs=dict(state.backoffs),
        last_scale_up=last_scale_up(records, cluster=config.cluster),
    )
    inventory = changed(observe(config, snapshot, now, reader, cluster=cluster))
    searched = looked.check(inventory) if looked is not None else ""  # one-shot: stops here, nothing written
    # `run`: a discovery that found nothing saw nothing; it decides nothing either. Planned as a dry
    # run, so an open proposal (a person's commits on it too), the state branch's timers and main
    # stay as they are until the groups are found again (a wrong region, an ASG untagged for a
    # moment, an empty answer): nothing there is "no longer wanted", it was not looked at.
    blind = bool(searched)
    dry_run = dry_run or blind
    if not dry_run:
        guard()
    withdrawn_text, withdrawn = withdraw_unsigned(copy, config, records, text, dry_run=dry_run)
    if withdrawn_text != text:  # the planner starts from main without them (and may propose them again)
        text, manifest = withdrawn_text, read_manifest(withdrawn_text, label, config)
    adopted_text, adopted = adopt_drift(copy, config, inventory, records, text, dry_run=dry_run)
    adopted = withdrawn + adopted
    if adopted_text != text:  # the planner starts from the adopted values (its baseline, rule 1)
        text, manifest = adopted_text, read_manifest(adopted_text, label, config)
    inputs = PlanInputs(
        inventory=inventory,
        config=config,
        now=now,
        committed=committed_groups(manifest),
        memory=memory,
        proposed=_proposed(copy, config),
        searched=searched,
    )
    inputs, plan = checked_plan(inputs, reader)
    if blind:
        notes = ("nothing written: no node group found, so nothing was decided (see the warning)",)
        return PlanRun(plan, notes=notes, inventory=inputs.inventory)
    if dry_run:
        return PlanRun(plan, notes=adopted, inventory=inputs.inventory)

    def replan(current: str | None) -> Plan:
        """Main moved: the plan again on its manifest, through the same refresh check (another
        manifest may pick removals in a group nobody asked about)."""
        fresh = replace(inputs, committed=committed_groups(read_manifest(current, label, config)))
        return checked_plan(fresh, reader)[1]

    forge = make_forge(config.forge, git_url=config.git.url)
    guard()
    published = publish(plan, text, replan, copy, forge, config, pushed=pushed)
    if adopted:
        published = replace(published, notes=adopted + published.notes)
    return PlanRun(published.plan, published, inventory=inputs.inventory)


@functools.cache
def _shipped_prices() -> Mapping[str, float]:
    return MappingProxyType(load_prices(None))


def checked_plan(inputs: PlanInputs, reader: AwsReader) -> tuple[PlanInputs, Plan]:
    """The plan, after asking AWS about instance refreshes only for the groups it names instances to
    remove from (one DescribeInstanceRefreshes each, not one per group): a refresh is replacing
    that group's instances, so none is proposed there and the plan is made again without them —
    until every group it removes from has been asked (a plan made again may pick other groups).
    The answers are kept on the inputs (has_instance_refresh), so a group is asked once."""
    if not inputs.prices:  # the shipped on-demand table: the price expander's and the plan's cost
        inputs = replace(inputs, prices=_shipped_prices(), prices_region=shipped_prices_region())
    while True:
        plan = planned(inputs)
        unasked = {
            g.name
            for g in plan.groups
            if g.remove_instances and inputs.inventory.group(g.name).group.has_instance_refresh is None
        }
        if not unasked:
            return inputs, plan
        refreshing = reader.refreshing(unasked)
        groups = tuple(
            replace(g, group=replace(g.group, has_instance_refresh=g.name in refreshing))
            if g.name in unasked
            else g
            for g in inputs.inventory.groups
        )
        inputs = replace(inputs, inventory=replace(inputs.inventory, groups=groups))
        if not refreshing:
            return inputs, plan


def planned(inputs: PlanInputs) -> Plan:
    """The plan, with the warnings of the cluster read (what it could not see, e.g. namespaces it may
    not list): the planner sees the state, not how it was read."""
    plan = make_plan(inputs)
    unseen = inputs.inventory.state.warnings
    return replace(plan, warnings=plan.warnings + unseen) if unseen else plan


def withdraw_unsigned(
    copy: WorkingCopy, config: Config, records: Records, text: str | None, *, dry_run: bool
) -> tuple[str | None, tuple[str, ...]]:
    """Removals on main that apply can never accept (added by a commit with no SSH signature under
    approval.mode signed: a proposal merged with the forge's button) are withdrawn in a commit of
    their own, before anything is planned, so the plan proposes them again for a signed approval
    (reconciler/gitops/withdraw.py). Only once apply's newest record refused them as not approved:
    the plan's config may not be apply's (an apply under github-reviews accepts a button merge),
    and a plan must not withdraw what apply would act on. Main's text afterwards, and what was
    (would be) written."""
    if text is None or not listed_removals(text, f"{config.git.branch}:{config.manifest_path}"):
        return text, ()
    branch, path = config.git.branch, config.manifest_path
    label = f"{branch}:{path}"
    latest: dict[str, Withdrawal] = {}

    def edit(current: str | None) -> Withdrawal | None:
        if current is None:
            return None
        newest = newest_record(records, config.cluster)
        if newest is None or not any(g.action == "refused" for g in newest.groups):
            return None  # apply refused nothing: no history walk on every cycle
        refused = {
            key: commit
            for key, commit in unsigned_removals(copy, config).items()
            if refused_by_apply(newest, *key)
        }
        return withdrawal(current, label, config.cluster, refused) if refused else None

    if dry_run:
        planned = edit(text)
        if planned is None:
            return text, ()
        return planned.text, tuple(f"would commit to {branch}: {note}" for note in planned.notes)

    def change(current: str | None) -> Update | None:
        latest.clear()
        planned = edit(current)
        if planned is None:
            return None
        latest["edit"] = planned
        return Update(planned.text, planned.message)

    sha = copy.update(branch, path, change)
    if "edit" not in latest or not sha:
        return text, ()
    done = latest["edit"]
    return done.text, (f"committed {sha[:12]} to {branch}: {done.notes[0]}", *done.notes[1:])


def adopt_drift(
    copy: WorkingCopy,
    config: Config,
    inventory: Inventory,
    records: Records,
    text: str | None,
    *,
    dry_run: bool,
) -> tuple[str | None, tuple[str, ...]]:
    """`apply.drift: adopt`, the plan's half (reconciler/gitops/adopt.py): commit to main, in a commit
    of its own (`Capacity-Source: external`), the desired apply adopted, before anything is planned.
    Main's manifest text afterwards (a dry run: as it would be), and what was (would be) written.

    Straight to main even with `scaleUp.review`: it records what AWS already has and changes nothing
    there. A rejected push fetches and looks again, so racing planners write it once.
    """
    record = newest_record(records, config.cluster)
    wanted = adopted_groups(record)
    if record is None or not wanted or text is None:
        return text, ()
    branch, path = config.git.branch, config.manifest_path
    label = f"{branch}:{path}"
    groups = {g.name: g.group for g in inventory.groups}
    aws_before = left_before(records, record, config.cluster)
    listed: dict[str, dict[str, CommittedGroup] | None] = {}

    def listed_at(sha: str) -> dict[str, CommittedGroup] | None:
        if sha not in listed:
            try:
                found = read_manifest(copy.read_file(path, sha), f"{sha[:12]}:{path}")
                listed[sha] = committed_groups(found) if found is not None else None
            except UserError:
                listed[sha] = None  # cannot tell what main said there: adopt nothing across it
        return listed[sha]

    def edit(current: str | None) -> AdoptionEdit | None:
        if current is None:
            return None
        tip = committed_groups(read_manifest(current, label, config))
        chain = copy.first_parent(branch, since=record.commit)  # main's tip first
        older = [*chain[1:], record.commit] if chain else []

        def since(name: str) -> Iterator[CommittedGroup | None]:
            yield tip.get(name)
            for sha in older:
                at = listed_at(sha)
                yield None if at is None else at.get(name)

        found: list[Adoption] = []
        for group in wanted:
            if group.name in groups:
                one = adoption(groups[group.name], group, since(group.name), aws_before.get(group.name))
                if one is not None:
                    found.append(one)
        return adoption_edit(current, label, config.cluster, found, groups) if found else None

    if dry_run:
        planned = edit(text)
        if planned is None:
            return text, ()
        notes = _adoption_notes(planned, f"would commit to {branch}")
        return planned.text, notes

    latest: dict[str, AdoptionEdit] = {}

    def change(current: str | None) -> Update | None:
        latest.clear()
        planned = edit(current)
        if planned is None:
            return None
        latest["edit"] = planned
        return Update(planned.text, planned.message) if planned.adoptions else None

    sha = copy.update(branch, path, change)
    if "edit" not in latest:
        return text, ()
    done = latest["edit"]
    notes = _adoption_notes(done, f"committed {sha[:12]} to {branch}" if sha else "")
    return (done.text if sha else text), notes


def _adoption_notes(edit: AdoptionEdit, where: str) -> tuple[str, ...]:
    notes = list(edit.skipped)
    if edit.adoptions and where:
        changes = ", ".join(str(a.change) for a in edit.adoptions)
        notes.insert(0, f"{where}: adopted {changes}, set outside the tool (apply.drift adopt)")
    return tuple(notes)
