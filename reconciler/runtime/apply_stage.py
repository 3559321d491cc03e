"""The apply stage, once: pick the commit of main to apply, check it may be applied, sync, record.

Order matters for safety: Git first (a bad ref or an older commit than the last applied one stops
everything before a single API call), then the cluster and AWS are observed, then the Lease is
taken (DESIGN §3.6), drains a crashed apply left behind are resumed or given back, and only then
does anything change. The record goes to `refs/notes/asg-reconciler`, the only thing apply pushes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git

from reconciler.apply.approval import make_gate
from reconciler.apply.approval.base import ApprovalGate
from reconciler.apply.changes import trace_removals
from reconciler.apply.sync import FAILED, REFUSED, ApplyInputs, ApplyReport, apply
from reconciler.aws.actuation import Actuator
from reconciler.aws.clients import make_clients
from reconciler.config import Config
from reconciler.errors import RefusedError, UserError
from reconciler.gitops.manifest import Manifest
from reconciler.gitops.records import (
    ApplyRecord,
    GroupRecord,
    Records,
    append_record,
    last_desired,
    read_records,
)
from reconciler.gitops.repo import REMOTE, WorkingCopy
from reconciler.kube.client import api_client
from reconciler.kube.drain import NodeDrainer
from reconciler.kube.lease import ApplyLease
from reconciler.runtime.plan_stage import read_manifest, working_copy
from reconciler.world import observe


@dataclass(frozen=True)
class ApplyRun:
    report: ApplyReport
    recorded: bool


class _GateAt:
    """The approval gate bound to the clone it reads commits from. Made (and its settings checked,
    a UserError before anything changes) only when the manifest lists removals: a run with nothing
    to judge, such as an urgent scale-up, never waits on approval settings it does not need."""

    def __init__(self, config: Config, repo: Path, manifest: Manifest) -> None:
        self.repo = repo
        needed = any(g.removal_ids for g in manifest.groups)
        self._gate: ApprovalGate | None = make_gate(config) if needed else None

    def approves(self, commit: str) -> tuple[bool, str]:
        if self._gate is None:  # the manifest listed no removal, so nothing asks
            return False, "no approval gate was set up (the manifest lists no removals)"
        verdict = self._gate.check(commit, self.repo)
        return verdict.approved, verdict.reason


def _resolve(copy: WorkingCopy, ref: str) -> str | None:
    """A branch of the remote, or any commit-ish of the clone."""
    repo = git.Repo(copy.path)
    for name in (f"refs/remotes/{REMOTE}/{ref}", ref):
        try:
            return str(repo.commit(name).hexsha)
        except (git.BadName, ValueError):
            continue
    return None


def _committed_at(copy: WorkingCopy, sha: str) -> datetime:
    """When a commit landed (its committer time: for a merge, when it was merged)."""
    return git.Repo(copy.path).commit(sha).committed_datetime.astimezone(UTC)


def _last_acted_on(records: Records, cluster: str) -> str | None:
    """The newest first-parent commit an apply of this cluster acted on, partly or wholly: a partial
    run changed AWS too, so going back behind it would undo what it did."""
    for commit, found in records.items():
        if any(r.cluster == cluster for r in found):
            return commit
    return None


def _target(copy: WorkingCopy, config: Config, ref: str | None, records: Records) -> tuple[str, list[str]]:
    """The commit to apply and main's first-parent chain from it backwards (rule 4)."""
    branch = config.git.branch
    chain = copy.first_parent(branch)
    if not chain:
        raise UserError(f"git.branch: {branch} has no commits in {copy.shown_url} (run plan first)")
    shown = f"--ref {ref}" if ref is not None else f"the tip of {branch}"
    target = chain[0] if ref is None else _resolve(copy, ref)
    if target is None:
        raise UserError(f"--ref {ref}: no such commit or branch in {copy.shown_url}")
    if target not in chain:
        raise RefusedError(
            f"{shown}: {target[:12]} is not on the first-parent history of {branch}; "
            "apply acts only on what was merged to it"
        )
    last = _last_acted_on(records, config.cluster)
    if last is not None and chain.index(target) > chain.index(last):
        raise RefusedError(
            f"{shown}: {target[:12]} is older than the last applied commit {last[:12]}; "
            "apply never goes back (commit a new change instead)"
        )
    return target, chain[chain.index(target) :]


def apply_once(config: Config, now: datetime, *, dry_run: bool, ref: str | None = None) -> ApplyRun:
    copy = working_copy(config)
    records = read_records(copy, config.git.branch)
    target, chain = _target(copy, config, ref, records)
    label = f"{target[:12]}:{config.manifest_path}"
    manifests: dict[str, Manifest | None] = {}

    def manifest_at(sha: str) -> Manifest | None:
        """An older commit's manifest that does not parse lists nothing: a removal then traces to
        the newer commit that listed it, which the gate judges (fails safe, never blocks a run)."""
        if sha not in manifests:
            try:
                manifests[sha] = read_manifest(
                    copy.read_file(config.manifest_path, sha), f"{sha[:12]}:{config.manifest_path}"
                )
            except UserError:
                manifests[sha] = None
        return manifests[sha]

    manifest = read_manifest(copy.read_file(config.manifest_path, target), label)
    manifests[target] = manifest
    if manifest is None:
        raise UserError(f"{label}: no manifest at the commit to apply (run plan first)")
    gate = _GateAt(config, copy.path, manifest)
    inventory = observe(config, None, now)
    inputs = ApplyInputs(
        config=config,
        inventory=inventory,
        manifest=manifest,
        commit=target,
        introduced=trace_removals(chain, manifest_at),
        commit_time=lambda sha: _committed_at(copy, sha),
        now=now,
        dry_run=dry_run,
        last_desired=last_desired(records, config.cluster),
    )
    kube = api_client(config.kubernetes)
    drainer = NodeDrainer(kube, timeout=config.apply.drain_timeout)
    actuator = Actuator(make_clients(config).autoscaling)
    if dry_run:
        return ApplyRun(apply(inputs, actuator, drainer, gate), recorded=False)
    with ApplyLease(kube, config.cluster) as lease:
        _give_back_stale_drains(drainer, inputs)
        report = apply(inputs, actuator, drainer, gate, guard=lease.check)
        append_record(copy, _record(config, report, datetime.now(UTC).replace(microsecond=0)))
    return ApplyRun(report, recorded=True)


def _give_back_stale_drains(drainer: NodeDrainer, inputs: ApplyInputs) -> None:
    """Nodes our taint marks but whose removal is no longer approved at the target (a crash between
    mark and terminate, then the approval was withdrawn): serve again. The rest resume in `apply`."""
    approved = {i for g in inputs.manifest.groups for i in g.removal_ids}
    instance_of = {n.name: n.instance_id for n in inputs.inventory.state.nodes}
    for node in drainer.marked():
        if instance_of.get(node) not in approved:
            drainer.unmark(node)


def _record(config: Config, report: ApplyReport, at: datetime) -> ApplyRecord:
    groups = tuple(
        GroupRecord(
            name=g.name,
            action=g.action,
            desired_before=g.desired_before,
            desired_after=g.desired_after,
            terminated=g.terminated,
            detail="; ".join(g.notes),
        )
        for g in report.groups
    )
    complete = all(g.action not in (FAILED, REFUSED) for g in report.groups)
    return ApplyRecord(
        commit=report.commit, applied_at=at, complete=complete, groups=groups, cluster=config.cluster
    )
