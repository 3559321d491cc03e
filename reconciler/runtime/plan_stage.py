"""The plan stage, once: read main and the state branch, observe, plan, and (unless dry-run) write.

Shared by `asg-reconciler plan` and the `run` loop, so both do exactly the same thing. Git is read
first: a broken manifest or an unreachable remote stops the run before anything else is touched.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from reconciler.config import Config
from reconciler.errors import UserError
from reconciler.gitops.forge import make_forge
from reconciler.gitops.manifest import Manifest, parse_manifest
from reconciler.gitops.plan_edits import committed_groups, listed_removals
from reconciler.gitops.publish import Published, proposal_branch, publish
from reconciler.gitops.records import last_desired, last_scale_up, read_records
from reconciler.gitops.repo import WorkingCopy
from reconciler.gitops.state import load_state
from reconciler.planning.plan import make_plan
from reconciler.planning.types import CommittedGroup, Plan, PlanInputs, PlannerMemory
from reconciler.world import observe


@dataclass(frozen=True)
class PlanRun:
    plan: Plan
    published: Published | None = None


def default_work_dir(config: Config) -> Path:
    """A cache directory per cluster and remote, so two configs never share a clone."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(config.git.url.encode()).hexdigest()[:10]
    return base / "asg-reconciler" / f"{config.cluster}-{digest}"


def working_copy(config: Config) -> WorkingCopy:
    if not config.git.url:
        raise UserError(
            f"{config.source or 'config'}: git.url: not set (point it at the capacity repository)"
        )
    copy = WorkingCopy.from_config(config.git, default_work_dir(config))
    copy.sync()
    return copy


def read_manifest(text: str | None, label: str) -> Manifest | None:
    """The manifest on main; a broken one is a UserError naming the line (nothing gets written)."""
    return None if text is None else parse_manifest(text, label)


def committed_on_main(config: Config) -> tuple[dict[str, CommittedGroup], str, dict[str, int]]:
    """The manifest on git.branch as the planner reads it, where it was read from, and each group's
    desired as the last apply left it (from the apply records)."""
    copy = working_copy(config)
    label = f"{config.git.branch}:{config.manifest_path}"
    text = copy.read_file(config.manifest_path, config.git.branch)
    applied = last_desired(read_records(copy, config.git.branch), config.cluster)
    return committed_groups(read_manifest(text, label)), label, applied


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


def plan_once(config: Config, snapshot: Path | None, now: datetime, *, dry_run: bool) -> PlanRun:
    if not config.git.url:
        if not dry_run:
            raise UserError(
                f"{config.source or 'config'}: git.url: required to write plans (set it, or pass --dry-run)"
            )
        return PlanRun(
            make_plan(PlanInputs(inventory=observe(config, snapshot, now), config=config, now=now))
        )

    copy = working_copy(config)
    label = f"{config.git.branch}:{config.manifest_path}"
    text = copy.read_file(config.manifest_path, config.git.branch)
    manifest = read_manifest(text, label)
    state = load_state(copy, config.cluster)
    memory = PlannerMemory(
        unneeded_since=dict(state.since),
        backoffs=dict(state.backoffs),
        last_scale_up=last_scale_up(read_records(copy, config.git.branch), cluster=config.cluster),
    )
    inputs = PlanInputs(
        inventory=observe(config, snapshot, now),
        config=config,
        now=now,
        committed=committed_groups(manifest),
        memory=memory,
        proposed=_proposed(copy, config),
    )
    plan = make_plan(inputs)
    if dry_run:
        return PlanRun(plan)

    def replan(current: str | None) -> Plan:
        return make_plan(replace(inputs, committed=committed_groups(read_manifest(current, label))))

    forge = make_forge(config.forge, git_url=config.git.url)
    published = publish(plan, text, replan, copy, forge, config)
    return PlanRun(published.plan, published)
