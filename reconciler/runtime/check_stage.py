"""`check --ref REF`: pull-request feedback for the capacity repository, Atlantis-style.

Three answers about REF (a proposal branch, a pull request's head, any commit of the remote), each
from the code that acts on it later, never from a copy of its rules:

1. `validate` on the manifest as REF has it (reconciler/gitops/validate.py), compared with the tip
   of `git.branch` for the hand-edited minSize/maxSize warnings;
2. the approval gate's verdict on each removal REF brings, judged on the commit that would bring it
   onto `git.branch` (apply's own `GateAt` and `trace_removals`, DESIGN §3 rule 4);
3. `apply --dry-run` of the branch as it would stand with REF landed (`apply_once`, dry run): which
   instances would be drained, each re-checked on live state, and every gate's verdict.

How an unmerged REF is judged: apply acts only on the first-parent history of `git.branch`, and a
proposal is not on it. So the landing is built in the local clone only, under a private ref that
is deleted afterwards and never pushed: REF itself when its first-parent history holds the branch's
tip (a fast-forward: REF's own commits reach the branch, so their signatures are what the gate
judges), else a merge commit of REF into the tip made by this run (unsigned, as a merge button's
would be: apply would judge that merge, and so does check). A REF already on the branch is applied
as `apply --dry-run --ref REF`. docs/ci.md explains the choice.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import git

from reconciler.apply.changes import trace_removals
from reconciler.apply.outcome import ApplyReport
from reconciler.config.settings import Config
from reconciler.domain.errors import OperationError, ReconcilerError, UserError
from reconciler.gitops.branch_check import require_branch
from reconciler.gitops.manifest import Manifest, for_cluster, parse_manifest
from reconciler.gitops.repo import REMOTE, WorkingCopy
from reconciler.gitops.validate import validate_files
from reconciler.runtime.apply_stage import ApplyRun, GateAt, apply_once, manifests_reader, resolve_ref
from reconciler.runtime.plan_stage import working_copy
from reconciler.views.check_report import ALREADY_ON_BRANCH, FAST_FORWARD, MERGE, CheckReport, GateLine

MARKER_PREFIX = "<!-- asg-reconciler:check"  # then ` cluster=NAME -->`: comment_marker
LEGACY_MARKER = "<!-- asg-reconciler check -->"  # before: one comment for every cluster
_PRIVATE = "refs/asg-reconciler-check"


def check_once(config: Config, ref: str, now: datetime, *, pull_request: int | None = None) -> CheckReport:
    """Judge REF as it would land on `git.branch`; nothing is pushed, nothing changes in AWS or the
    cluster. `pull_request`: where a fork's head may be fetched from (`refs/pull/N/head`)."""
    branch = config.git.branch
    copy = working_copy(config)
    sha = resolve_ref(copy, ref) or _fetch_ref(copy, ref, pull_request)
    if sha is None:
        raise UserError(f"--ref {ref}: no such commit or branch in {copy.shown_url}")
    require_branch(copy, branch, config.source or "config")
    tip = copy.head(branch)
    if tip is None:
        raise UserError(f"git.branch: {branch} has no commits in {copy.shown_url} (run plan first)")
    errors, warnings = _validate(copy, config, sha, tip)
    main_chain = copy.first_parent(branch)
    landing = (
        ALREADY_ON_BRANCH if sha in main_chain else FAST_FORWARD if tip in copy.first_parent(sha) else MERGE
    )
    report = CheckReport(
        ref=ref,
        commit=sha,
        branch=branch,
        tip=tip,
        landing=landing,
        manifest_path=config.manifest_path,
        approval_mode=config.approval.mode,
        errors=errors,
        warnings=warnings,
    )
    if errors:
        return replace(report, notes=("not judged further: the manifest at REF does not validate",))
    if landing == ALREADY_ON_BRANCH:
        return _judge(
            report, config, copy, sha, main_chain, lambda: apply_once(config, now, dry_run=True, ref=sha)
        )
    private = f"{_PRIVATE}/{secrets.token_hex(6)}"
    repo = git.Repo(copy.path)
    try:
        landed = sha if landing == FAST_FORWARD else _merge(copy, repo, tip, sha, ref, branch)
        repo.git.update_ref(private, landed)
        landed_config = replace(config, git=replace(config.git, branch=private))
        return _judge(
            report,
            config,
            copy,
            landed,
            main_chain,
            lambda: apply_once(landed_config, now, dry_run=True),
            shown=(private, f"{branch} (with {ref} landed)"),
        )
    finally:
        for made in (private, f"{_PRIVATE}/fetched"):  # nothing fetched or built stays in the clone
            with contextlib.suppress(git.GitCommandError):  # never created when the merge failed
                repo.git.update_ref("-d", made)


def _fetch_ref(copy: WorkingCopy, ref: str, pull_request: int | None) -> str | None:
    """A commit the branch fetch did not bring: a commit id only the remote has, or a fork's pull
    request head (`refs/pull/N/head`). Fetched into a private ref of the clone (never pushed)."""
    target = f"{_PRIVATE}/fetched"
    sources = [ref] + ([f"refs/pull/{pull_request}/head"] if pull_request is not None else [])
    for source in sources:
        try:
            with copy._locked():
                copy._git("fetch", "--no-tags", REMOTE, f"+{source}:{target}")
        except OperationError:
            continue
        found = resolve_ref(copy, ref) or (resolve_ref(copy, target) if source == ref else None)
        if found is not None:
            return found
    return None


def _validate(
    copy: WorkingCopy, config: Config, sha: str, tip: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """validate's errors and warnings for the manifest at `sha`, compared with the branch tip's."""
    path = config.manifest_path
    label = f"{sha[:12]}:{path}"
    text = copy.read_file(path, sha)
    if text is None:
        return (f"{label}: no manifest at REF (git.path / the cluster's manifest is missing)",), ()
    before = copy.read_file(path, tip)
    with tempfile.TemporaryDirectory(prefix="asg-reconciler-check-") as scratch:
        file = Path(scratch, Path(path).name)
        file.write_text(text, encoding="utf-8")
        result = validate_files([file], previous=lambda _: before)
        shown = str(file)
        errors = tuple(str(p).replace(shown, label) for p in result.errors)
        warnings = tuple(str(p).replace(shown, label) for p in result.warnings)
    if not errors:  # well formed: then it must be this cluster's, as plan, apply and approve insist
        try:
            for_cluster(
                parse_manifest(text, label), config.cluster, f"the config ({config.source or 'config'})"
            )
        except UserError as exc:
            errors = (str(exc),)
    return errors, warnings


def _merge(copy: WorkingCopy, repo: git.Repo, tip: str, sha: str, ref: str, branch: str) -> str:
    """The merge commit of `sha` into `tip` a merge button would make (unsigned), in the clone only."""
    try:
        tree = repo.git.merge_tree("--write-tree", "--no-messages", tip, sha).split()[0]
    except git.GitCommandError:
        raise UserError(
            f"--ref {ref}: does not merge cleanly into {branch} ({tip[:12]}); rebase it onto {branch} "
            "or resolve the conflict, then check again"
        ) from None
    identity = copy.identity
    env = {
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
    }
    message = f"asg-reconciler check: {ref} merged into {branch} (local only, never pushed)"
    merged: str = repo.git.commit_tree(tree, "-p", tip, "-p", sha, "-m", message, env=env)
    return merged.strip()


def _judge(
    report: CheckReport,
    config: Config,
    copy: WorkingCopy,
    landed: str,
    main_chain: list[str],
    dry_run: Callable[[], ApplyRun],
    shown: tuple[str, str] | None = None,
) -> CheckReport:
    report = _gate(replace(report, landed=landed), config, copy, landed, main_chain)
    try:
        run = dry_run()
    except ReconcilerError as exc:
        message = str(exc) if shown is None else str(exc).replace(*shown)
        return replace(report, dry_run_error=message, dry_run_error_code=exc.exit_code)
    apply_report = run.report
    if shown is not None:
        apply_report = _unprivate(apply_report, *shown)
    return replace(report, dry_run=apply_report)


def _gate(
    report: CheckReport, config: Config, copy: WorkingCopy, landed: str, main_chain: list[str]
) -> CheckReport:
    """The gate's verdict on each removal REF brings: the removals listed once it landed whose
    bringing commit (apply's rule 4 trace) is not already on the branch."""
    chain = copy.first_parent(landed)
    manifest_at = manifests_reader(copy, config)

    landed_manifest = manifest_at(landed)
    if not isinstance(landed_manifest, Manifest):
        return report
    on_branch = set(main_chain)
    brought = [i for i in trace_removals(chain, manifest_at).values() if i.commit not in on_branch]
    if not brought:
        return report
    try:
        gate = GateAt(config, copy, landed_manifest)
        lines = []
        for item in sorted(brought, key=lambda i: (i.group, i.instance_id)):
            if item.unreadable:
                approved, reason = (
                    False,
                    (
                        f"cannot tell which commit added it: the manifest at {item.unreadable[:12]} does not "
                        f"parse ({item.why})"
                    ),
                )
            else:
                approved, reason = gate.approves(item.commit)
            lines.append(GateLine(item.group, item.instance_id, item.commit, approved, reason))
    except ReconcilerError as exc:
        return replace(report, gate_error=str(exc), gate_error_code=exc.exit_code)
    return replace(report, verdicts=tuple(lines))


def _unprivate(report: ApplyReport, private: str, shown: str) -> ApplyReport:
    """apply's words about the private landing ref, as the branch a reader knows."""

    def fix(text: str) -> str:
        return text.replace(private, shown)

    groups = tuple(replace(g, notes=tuple(fix(n) for n in g.notes)) for g in report.groups)
    return replace(report, groups=groups, warnings=tuple(fix(w) for w in report.warnings))
