"""The apply stage, once: take the Lease, pick the commit of main to apply, check it may be
applied, sync, record.

Order matters for safety (DESIGN §3.6): the Lease first, so nothing is observed or decided while
another apply acts; then Git (the records, checked against apply's own key and the anchor on its
Lease; a bad ref, or a target that does not have the last applied commit in its first-parent
history, stops everything before a single API call); then the cluster and AWS are observed, and
only then does anything change. Records go to `refs/notes/asg-reconciler`, the only thing apply
pushes: the intent before each termination, the result at the end.

Every write reads the Lease first (DESIGN §3.6): the drainer and the actuator are built here, in
`_writers` only, on a Kubernetes client and AWS clients that run the Lease's check before any call
that changes something, and the recorder checks before each push. A Lease that is someone else's
stops the run where it stands (LeaseLost: nothing more is written, not even a node given back) and
is one line and exit 1 here.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import git
from kubernetes import client as k8s

from reconciler.apply.approval import make_gate
from reconciler.apply.approval.base import ApprovalGate
from reconciler.apply.changes import Unreadable, trace_removals
from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.outcome import FAILED, REFUSED, SCALE_DOWN, SCALE_UP, ApplyReport
from reconciler.apply.sync import apply
from reconciler.apply.taints import release_strays
from reconciler.aws.actuation import Actuator
from reconciler.aws.clients import AwsClients, make_clients
from reconciler.aws.discovery import nothing_found
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config
from reconciler.domain.errors import ReconcilerError, RefusedError, StopRequested, UserError
from reconciler.gitops.branch_check import require_branch
from reconciler.gitops.forge.base import Forge
from reconciler.gitops.history import NOTES_REF
from reconciler.gitops.manifest import Manifest
from reconciler.gitops.plan_edits import committed_groups
from reconciler.gitops.record_reading import OBSERVATIONS_PER_COMMIT, what_is_new, worth_writing
from reconciler.gitops.record_signing import Signer, load_signer, load_verifier
from reconciler.gitops.record_store import append_record, read_trusted_records
from reconciler.gitops.record_trust import TrustedRecords
from reconciler.gitops.records import ApplyRecord, GroupRecord, record_digest
from reconciler.gitops.repo import REMOTE, WorkingCopy
from reconciler.kube.client import api_client
from reconciler.kube.control import SuspendedError, Switch
from reconciler.kube.drain import NodeDrainer
from reconciler.kube.errors import KubernetesError
from reconciler.kube.lease import ApplyLease, LeaseLost
from reconciler.runtime.plan_stage import read_manifest, working_copy
from reconciler.runtime.unsigned_merges import manifests_reader as manifests_reader
from reconciler.runtime.world import observe

_log = logging.getLogger(__name__)
_HEX = re.compile(r"[0-9a-f]{7,64}")
_AWS_READS = ("Describe", "Get", "List")


@dataclass(frozen=True)
class ApplyRun:
    report: ApplyReport
    recorded: bool
    node_groups: tuple[str, ...] = ()  # what discovery found (the run loop says when it changes)
    searched: str = ""  # discovery found no group: where it looked


class GateAt:
    """The approval gate bound to the clone it reads commits from. Made (and its settings checked,
    a UserError before anything changes) only when the manifest lists removals: a run with nothing
    to judge, such as an urgent scale-up, never waits on approval settings it does not need. Each
    commit is judged once per run (every removal it brought asks the same question)."""

    def __init__(
        self, config: Config, copy: WorkingCopy, manifest: Manifest, *, forge: Forge | None = None
    ) -> None:
        self.repo = copy.path
        needed = any(g.removal_ids for g in manifest.groups)
        self._gate: ApprovalGate | None = (
            make_gate(config, forge=forge, fetch=copy.fetch_ref) if needed else None
        )
        self._verdicts: dict[str, tuple[bool, str]] = {}

    def approves(self, commit: str) -> tuple[bool, str]:
        if self._gate is None:  # the manifest listed no removal, so nothing asks
            return False, "no approval gate was set up (the manifest lists no removals)"
        if commit not in self._verdicts:
            verdict = self._gate.check(commit, self.repo)
            self._verdicts[commit] = (verdict.approved, verdict.reason)
        return self._verdicts[commit]


def resolve_ref(copy: WorkingCopy, ref: str) -> str | None:
    """A commit id (or its prefix), else a branch of the remote, else any commit-ish of the clone.
    A commit id comes first: the bot could push a branch named like the id an operator typed."""
    repo = git.Repo(copy.path)
    branch_first = not _HEX.fullmatch(ref)
    names = (f"refs/remotes/{REMOTE}/{ref}", ref) if branch_first else (ref, f"refs/remotes/{REMOTE}/{ref}")
    for name in names:
        try:
            return str(repo.commit(name).hexsha)
        except (git.BadName, ValueError, KeyError, OSError):  # `a:b`, `main@{1}`: no commit, no crash
            continue
    return None


def _committed_at(copy: WorkingCopy, sha: str) -> datetime:
    """When a commit landed (its committer time: for a merge, when it was merged)."""
    return git.Repo(copy.path).commit(sha).committed_datetime.astimezone(UTC)


def _target(copy: WorkingCopy, config: Config, ref: str | None, last: str | None) -> tuple[str, list[str]]:
    """The commit to apply and its first-parent chain backwards (rule 4): on the first-parent history
    of the branch, and having the last commit any apply acted on in its own first-parent history."""
    branch = config.git.branch
    chain = copy.first_parent(branch)
    if not chain:  # (`check` names a private ref here, which resolves: never a branch to look for)
        require_branch(copy, branch, config.source or "config")  # a typo, not a repository to fill
        raise UserError(f"git.branch: {branch} has no commits in {copy.shown_url} (run plan first)")
    shown = f"--ref {ref}" if ref is not None else f"the tip of {branch}"
    target = chain[0] if ref is None else resolve_ref(copy, ref)
    if target is None:
        raise UserError(f"--ref {ref}: no such commit or branch in {copy.shown_url}")
    if target not in chain:
        raise RefusedError(
            f"{shown}: {target[:12]} is not on the first-parent history of {branch}; "
            "apply acts only on what was merged to it",
            kind="rewritten",
        )
    own = chain[chain.index(target) :]
    if last is not None and last not in own:
        if last in chain:
            raise RefusedError(
                f"{shown}: {target[:12]} is older than the last applied commit {last[:12]}; "
                "apply never goes back (commit a new change instead)",
                kind="rewritten",
            )
        raise RefusedError(
            f"{shown}: the last applied commit {last[:12]} is not on the first-parent history of "
            f"{target[:12]}: {branch} was rewritten around it (a force-push, or a merge that skips it), "
            "which could bring back an approval withdrawn since; nothing applied. To go on, a person "
            f"merges {branch} into that commit with a signed merge whose first parent is {last[:12]} "
            f"(git checkout {last[:12]} && git merge --no-ff -S origin/{branch} && git push origin "
            f"HEAD:{branch}), which re-approves whatever it brings back",
            kind="rewritten",
        )
    return target, own


@dataclass(frozen=True)
class LoopHooks:
    """What the `run` loop lends an apply: its stop request (`stopping`, as Effects.stopping) and a
    heartbeat called at every guarded step, so a long drain counts as progress for /healthz."""

    stopping: Callable[[float], bool] = lambda finishes_by: False
    progress: Callable[[], None] = lambda: None


def apply_once(
    config: Config,
    now: datetime,
    *,
    dry_run: bool,
    ref: str | None = None,
    hooks: LoopHooks | None = None,
) -> ApplyRun:
    """One apply. Not a dry run: the Lease first (DESIGN §3.6), then everything is read under it."""
    kube = api_client(config.kubernetes, parallel=config.apply.max_parallel_drains)
    if dry_run:
        return _apply(config, now, kube, None, dry_run=True, ref=ref)
    hooks = hooks or LoopHooks()
    lease = ApplyLease(kube, config.cluster, on_wait=partial(_waiting, hooks))
    interrupts = Interrupts()
    try:
        with lease, interrupts.installed():
            try:
                return _apply(
                    config, now, kube, lease, dry_run=False, ref=ref, hooks=hooks, shield=interrupts.shield
                )
            except SuspendedError:
                raise  # the kill switch: not even a taint is given back
            except (RefusedError, UserError):
                _give_back_strays(config, kube, lease)
                raise
    except LeaseLost as exc:
        raise KubernetesError(str(exc)) from None


def _waiting(hooks: LoopHooks) -> None:
    """While another holder's Lease is watched for expiry: a heartbeat for /healthz, and the `run`
    loop's stop request ends the wait."""
    hooks.progress()
    if hooks.stopping(math.inf):
        raise StopRequested


def _writers(
    config: Config, kube: k8s.ApiClient, clients: AwsClients, lease: ApplyLease | None
) -> tuple[NodeDrainer, Actuator]:
    """The only objects apply changes the cluster and AWS through. With a Lease, every call either
    makes that changes something reads the Lease first (`ApplyLease.guard_writes` for the cluster: a
    taint, an eviction, a give-back; a botocore hook for AWS: SetDesiredCapacity, a termination),
    so no path through reconciler/apply/ can write without it. A dry run has none and writes
    nothing."""
    if lease is not None:
        kube = lease.guard_writes(kube)
        _confirm_before_aws_writes(clients, lease.check)
    drainer = NodeDrainer(
        kube, timeout=config.apply.drain_timeout, max_grace_period=config.apply.max_grace_period
    )
    return drainer, Actuator(clients.autoscaling, clients.ec2)


def _confirm_before_aws_writes(clients: AwsClients, confirm: Callable[[], None]) -> None:
    """Run `confirm` before every AWS call of these clients that is not a read."""

    def before_call(model: Any, **_: Any) -> None:
        if not str(model.name).startswith(_AWS_READS):
            confirm()

    for client in (clients.autoscaling, clients.ec2):
        client.meta.events.register("before-call", before_call)


def _give_back_strays(config: Config, kube: k8s.ApiClient, lease: ApplyLease) -> None:
    """A run refused before it reached the groups (main rewritten, a broken manifest,
    cluster-autoscaler live) still gives back the nodes a crashed run left tainted (DESIGN §3.6):
    otherwise one push could keep them out of service. Reported in the log; best effort."""
    try:
        clients = make_clients(config)
    except ReconcilerError:
        return
    drainer, actuator = _writers(config, kube, clients, lease)
    effects = Effects(actuator, drainer, _NoGate(), going_away=actuator.going_away)
    given_back, stuck = release_strays(effects)
    for line in given_back + stuck:
        _log.warning("drain taint: %s", line)


class _NoGate:
    def approves(self, commit: str) -> tuple[bool, str]:
        return False, "no removal is judged in a refused run"


def _apply(
    config: Config,
    now: datetime,
    kube: k8s.ApiClient,
    lease: ApplyLease | None,
    *,
    dry_run: bool,
    ref: str | None,
    hooks: LoopHooks = LoopHooks(),
    shield: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> ApplyRun:
    started = time.monotonic()  # fresh observations are stamped `now` plus the time since
    switch = Switch(config, kube)
    control = switch.read()
    control.refuse_if_suspended()  # the kill switch: nothing is read further, nothing changes
    keys = RecordKeys(config)
    # Before anything is read: a run must leave a trace apply can trust, and a dry run must judge the
    # records as apply would (a missing key is a config error, never "the records were tampered with").
    signer = keys.signer(required=not dry_run or not keys.verifier)
    copy = working_copy(config)
    copy.fetch_notes(NOTES_REF)
    anchor = lease.anchor if lease is not None else ApplyLease(kube, config.cluster).read_anchor()
    trust = read_trusted_records(copy, config.cluster, keys.verifier, anchor)
    for warning in trust.warnings:
        _log.warning("%s", warning)
    target, chain = _target(copy, config, ref, trust.last_acted_on())
    label = f"{target[:12]}:{config.manifest_path}"
    manifest_at = manifests_reader(copy, config)

    manifest = read_manifest(copy.read_file(config.manifest_path, target), label, config)
    if manifest is None:
        raise UserError(f"{label}: no manifest at the commit to apply (run plan first)")
    gate = GateAt(config, copy, manifest)
    reader = AwsReader(config)  # never reuses descriptions: apply acts on AWS as it is now
    # Pods, PDBs, DaemonSets and volumes only judge removals (the re-check, the drain): a target that
    # lists none is applied on the nodes alone, so a raise at 150,000 pods does not wait for them all.
    judging = any(g.removal_ids for g in manifest.groups)
    inventory = observe(config, None, now, reader, pods=judging)
    found = tuple(g.name for g in inventory.groups)
    searched = "" if found else nothing_found(config, reader.region)

    def ran(report: ApplyReport, recorded: bool) -> ApplyRun:
        return ApplyRun(report, recorded, node_groups=found, searched=searched)

    states = {i.instance_id: i.lifecycle_state for g in inventory.groups for i in g.group.instances}
    known = {g.name for g in inventory.groups} | {g.name for g in manifest.groups}  # the switch's groups
    inputs = ApplyInputs(
        config=config,
        inventory=inventory,
        manifest=manifest,
        commit=target,
        introduced=trace_removals(chain, manifest_at),
        commit_time=lambda sha: _committed_at(copy, sha),
        now=now,
        dry_run=dry_run,
        last_desired=trust.last_desired(
            lambda instance: states.get(instance) == "InService",
            {g.name: g.group.desired for g in inventory.groups},
        ),
        open_intents=tuple(
            (g.name, i) for record in trust.open_intents() for g in record.groups for i in g.terminated
        ),
        records_problems=trust.problems,
        suspended={name: why.describe(f"{name} is") for name, why in control.suspended_groups(known).items()},
        notices=tuple(control.warnings(known)),
        held=_held(trust, chain, manifest_at),
    )
    drainer, actuator = _writers(config, kube, reader.clients, lease)

    def refreshing(group: str) -> bool:
        return group in reader.refreshing([group])

    if lease is None:
        # A dry run asks AWS (a read) whether a tainted node's machine is going away, as the real
        # run does: otherwise it promises to give back the taint of a node being terminated.
        effects = Effects(actuator, drainer, gate, going_away=actuator.going_away, refreshing=refreshing)
        return ran(apply(inputs, effects), recorded=False)
    # A run that found the records untrustworthy never moves the anchor: its own record must not
    # become the trusted latest one, or the next run would trust what the attacker left.
    anchoring = lease if signer is not None and not trust.problems else None
    recorder = _Recorder(copy, config.cluster, target, signer, anchoring, trust.latest_digest, lease.check)
    effects = Effects(
        actuator,
        drainer,
        gate,
        guard=lambda group: _guard(lease, switch, group, hooks.progress),
        going_away=actuator.going_away,
        observe=lambda: observe(config, None, now + timedelta(seconds=time.monotonic() - started), reader),
        refreshing=refreshing,
        intend=recorder.intent,
        stopping=hooks.stopping,
        shield=shield,
    )
    report = apply(inputs, effects)
    if report.in_flight:
        # Interrupted in the middle of a termination: its intent stays open, so the next run learns
        # from AWS whether it went (a result recorded now would have to guess).
        return ran(report, recorded=False)
    # No idle writes: a run that changed nothing and found nothing new leaves the last record as the
    # word on what is applied (docs/gitops.md "When apply writes a record").
    on_commit = sum(1 for r in trust.records if r.commit == target)
    recorded = recorder.done(report, trust.latest, on_commit=on_commit)
    for group, before, raised_to in report.raising:  # after the result: open until the next run looks
        recorder.raise_intent(group, before, raised_to)
        recorded = True
    return ran(report, recorded)


def _guard(lease: ApplyLease, switch: Switch, group: str, progress: Callable[[], None]) -> None:
    """Before every change: the Lease still ours, and nobody pulled the switch meanwhile."""
    progress()
    lease.check()
    switch.read().refuse_if_suspended(group)


def _held(
    trust: TrustedRecords, chain: list[str], manifest_at: Callable[[str], Manifest | Unreadable | None]
) -> dict[str, int]:
    """Groups whose desired, set outside the tool, the newest run adopted (apply.drift adopt), with
    that value, as long as main has not changed the group's desired since that run's commit: until
    the next plan commits it, later runs must not raise back what was adopted."""
    newest = next((r for r in trust.records if r.phase == "done"), None)
    if newest is None or newest.commit not in chain:
        return {}
    newer = chain[: chain.index(newest.commit) + 1]

    def desired(sha: str, group: str) -> int | None:
        manifest = manifest_at(sha)
        if not isinstance(manifest, Manifest):
            return None
        entry = committed_groups(manifest).get(group)
        return None if entry is None else entry.desired

    held: dict[str, int] = {}
    for g in newest.groups:
        if g.adopted:
            then = desired(newest.commit, g.name)
            if then is not None and all(desired(sha, g.name) == then for sha in newer):
                held[g.name] = g.desired_after
    return held


class RecordKeys:
    """Apply's own signing key (its records are trusted only if the plan credentials could not have
    written them, DESIGN §3.4) and the keys whose records it trusts."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._signer: Signer | None = None
        self._error: UserError | None = None
        try:
            self._signer = load_signer(config.apply.signing_key, "apply.signingKey")
        except UserError as exc:
            self._error = exc
        self.verifier = load_verifier(config.apply.record_signers, "apply.recordSigners", own=self._signer)

    def signer(self, *, required: bool) -> Signer | None:
        """The key; every run that may change anything needs it (a UserError before anything is
        read). A run that acted without leaving a record apply can trust would let a rewrite of main
        skip the commit it applied (rule 4), so there is no unsigned mode. A dry run goes without."""
        if self._signer is None and self._error is not None and required:
            raise UserError(
                f"{self._error} (apply signs every record it writes, and any run may write one; a dry "
                "run without it needs the public key in apply.recordSigners)"
            )
        return self._signer


class _Recorder:
    """Apply's records of this run: the intent before each termination (write-ahead), the result at
    the end; each signed, chained to the one before, and anchored on apply's own Lease. Each push
    comes after `confirm` (the Lease's check): a run that lost its Lease leaves no record."""

    def __init__(
        self,
        copy: WorkingCopy,
        cluster: str,
        commit: str,
        signer: Signer | None,
        lease: ApplyLease | None,
        previous: str,
        confirm: Callable[[], None],
    ) -> None:
        self.copy, self.cluster, self.commit, self.signer, self.lease = copy, cluster, commit, signer, lease
        self.previous = previous
        self.confirm = confirm
        self.run = secrets.token_hex(8)
        self.intents = 0  # intent records this run wrote: its result must follow them
        self._lock = threading.Lock()

    def intent(self, group: str, instance: str, before: int, after: int) -> None:
        self._append(
            ApplyRecord(
                commit=self.commit,
                applied_at=_stamp(),
                complete=False,
                groups=(
                    GroupRecord(
                        name=group,
                        action=SCALE_DOWN,
                        desired_before=before,
                        desired_after=after,
                        terminated=(instance,),
                        detail=f"intent: terminate {instance} (recorded before the call)",
                    ),
                ),
                cluster=self.cluster,
                run=self.run,
                phase="intent",
            )
        )

    def raise_intent(self, group: str, before: int, target: int) -> None:
        """A raise interrupted inside its call: whether AWS took it is not known here. Left open, the
        next run reads AWS: at `target`, the raise was ours (not drift); at `before`, it never
        happened (DESIGN §3 rule 6's write-ahead, written on the way out)."""
        self._append(
            ApplyRecord(
                commit=self.commit,
                applied_at=_stamp(),
                complete=False,
                groups=(
                    GroupRecord(
                        name=group,
                        action=SCALE_UP,
                        desired_before=before,
                        desired_after=target,
                        detail=f"intent: raise desired {before} -> {target} (interrupted inside the call)",
                    ),
                ),
                cluster=self.cluster,
                run=self.run,
                phase="intent",
            )
        )

    def done(self, report: ApplyReport, latest: ApplyRecord | None, *, on_commit: int) -> bool:
        """The run's result, when it is worth a record against `latest` (the newest trusted one;
        `on_commit`: apply's records on the target commit); True when written."""
        groups = tuple(
            GroupRecord(
                name=g.name,
                action=g.action,
                desired_before=g.desired_before,
                desired_after=g.desired_after,
                terminated=g.terminated,
                detail="; ".join(g.notes),
                adopted=g.adopted,
            )
            for g in report.groups
        )
        complete = (
            all(g.action not in (FAILED, REFUSED) for g in report.groups)
            and not any(g.waiting for g in report.groups)  # approved removals held for their window
            and not report.stuck
            and not report.interrupted
        )
        record = ApplyRecord(
            commit=report.commit,
            applied_at=_stamp(),
            complete=complete,
            groups=groups,
            cluster=self.cluster,
            run=self.run,
        )
        acted = self.intents > 0 or bool(report.given_back) or report.interrupted
        why = worth_writing(record, latest, on_commit=on_commit, acted=acted)
        if not why:
            if what_is_new(record, latest):
                _log.info(
                    "apply: not recorded: the note on %s already holds %d records of this kind "
                    "(at most %d per commit; the status ConfigMap, events and metrics still say it)",
                    record.commit[:12],
                    on_commit,
                    OBSERVATIONS_PER_COMMIT,
                )
            else:
                _log.debug("apply: nothing new since the last record: none written")
            return False
        _log.debug("apply: recording the run: %s", why)
        self._append(record)
        return True

    def _append(self, record: ApplyRecord) -> None:
        with self._lock:
            record = replace(record, previous=self.previous)
            self.confirm()
            append_record(self.copy, record, signer=self.signer)
            if record.phase == "intent":
                self.intents += 1
            self.previous = record_digest(record, copy=self.copy)
            if self.lease is not None:
                self.lease.set_anchor(self.previous)


def _stamp() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class Interrupts:
    """SIGINT (Ctrl-C) and SIGTERM (a pod stopped, a CI job cancelled) during a one-shot apply.

    Outside a shield either one raises KeyboardInterrupt where the run stands: drains give their
    nodes back, the result is recorded, the Lease is released. Inside a shield (an AWS write whose
    outcome the record must say: SetDesiredCapacity) the first one waits for AWS's answer and is
    raised when the shield ends, so the record says what AWS did and the next run does not blame
    someone else for our own raise; a second one interrupts at once (its raise is then recorded as
    an intent the next run resolves)."""

    def __init__(self) -> None:
        self._shielded = 0
        self._pending = False

    def handle(self, signum: int, frame: object) -> None:
        if self._shielded and not self._pending:
            self._pending = True
            _log.warning(
                "apply: %s: finishing the AWS call under way so that its outcome is recorded, then "
                "stopping (interrupt again to stop at once)",
                signal.Signals(signum).name,
            )
            return
        raise KeyboardInterrupt

    @contextmanager
    def shield(self) -> Iterator[None]:
        self._shielded += 1
        try:
            yield
        finally:
            self._shielded -= 1
            if self._pending and not self._shielded:
                self._pending = False
                raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The handler for SIGINT and SIGTERM, in the main thread only (the `run` loop has its own
        stop request, LoopHooks.stopping)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
