"""`status`, once: observe the cluster and the groups, and compare them with the manifest on main.

The manifest is read only when `git.url` is set. Status is a diagnostic, so a manifest it cannot
read (remote unreachable, file broken) is a warning in the report, not a failed command; a broken
cluster read still fails as it does everywhere else.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

from reconciler.apply.caps import beyond_bounds
from reconciler.aws.discovery import nothing_found
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config
from reconciler.domain.errors import ReconcilerError, UserError
from reconciler.gitops.errors import BranchMissingError, WorkDirError
from reconciler.gitops.proposal import open_proposal
from reconciler.gitops.publish import proposal_problem, way_out_of_a_broken_proposal
from reconciler.gitops.record_reading import last_desired
from reconciler.kube.client import api_client
from reconciler.kube.control import Switch
from reconciler.runtime.plan_stage import committed_on_main, working_copy
from reconciler.runtime.unsigned_merges import unsigned_removals
from reconciler.runtime.world import observe
from reconciler.views.status import ProposalStatus, StatusReport, build_status


def status_once(config: Config, snapshot: Path | None, now: datetime) -> StatusReport:
    committed, label, error, records, proposal = None, None, None, None, None
    unapproved: set[str] = set()
    notices: list[str] = []
    if config.git.url:
        try:
            committed, label, records = committed_on_main(config)
            proposal = _proposal(config)
            copy = working_copy(config, fetch=False)
            unapproved = {i for _, i in unsigned_removals(copy, config)}
            broken = proposal_problem(copy, config)
            if broken is not None and proposal is not None:
                notices.append(
                    f"scale-down proposal {proposal.branch} cannot be read: {broken}; the plan leaves it "
                    f"as it is and proposes nothing new: {way_out_of_a_broken_proposal(proposal.branch)}"
                )
        except (WorkDirError, BranchMissingError):
            raise  # the deployment's to fix, not something Git said: exit 2
        except ReconcilerError as exc:
            error = str(exc)
    reader = AwsReader(config)
    inventory = observe(config, snapshot, now, reader, refreshes=True)  # a diagnostic: ask every group
    if not inventory.groups:  # exit 2, as plan: a config that finds no ASG is to be fixed first
        raise UserError(f"{config.source or 'config'}: nodeGroups: {nothing_found(config, reader.region)}")
    applied = None
    if records is not None:  # as apply reads it: an open intent counts by what AWS shows of it
        states = {i.instance_id: i.lifecycle_state for g in inventory.groups for i in g.group.instances}
        applied = last_desired(
            records,
            config.cluster,
            observed={g.name: g.group.desired for g in inventory.groups},
            in_service=lambda instance: states.get(instance) == "InService",
        )
    report = build_status(
        config.cluster,
        inventory,
        committed,
        label,
        error,
        last_applied=applied,
        proposal=proposal,
        scale_up=config.scale_up,
        beyond_bounds=beyond_bounds(config, inventory, committed) if committed is not None else None,
        unapproved=unapproved,
    )
    report = replace(report, aws_calls=reader.counter.snapshot())
    report = replace(report, warnings=report.warnings + tuple(notices) + inventory.state.warnings)
    if snapshot is not None:
        return report  # a dump says nothing about the kill switch now
    known = [g.name for g in inventory.groups]
    return replace(report, warnings=report.warnings + tuple(_switch(config, known)))


def _proposal(config: Config) -> ProposalStatus | None:
    """The open scale-down proposal, as just fetched: beside the manifest, what waits for approval."""
    found = open_proposal(
        working_copy(config, fetch=False), config.cluster, config.git.branch, config.manifest_path
    )
    return None if found is None else ProposalStatus(found.branch, found.opened_at, found.removals)


def _switch(config: Config, known: list[str]) -> list[str]:
    """The kill switch, as apply would find it now, and what in it a person should correct."""
    try:
        control = Switch(config, api_client(config.kubernetes)).read()
        return control.lines() + control.warnings(known)
    except ReconcilerError as exc:
        return [f"kill switch not read: {exc}"]
