"""`asg-reconciler run`: the stages of `run.stages` as one long-running process (docs/operations.md).

Each stage is a thread behind its own leader election (the Lease `asg-reconciler-<stage>-leader-
<cluster>` in `run.namespace`), and each cycle is exactly `plan_once` or `apply_once`: this module
only decides when, and tells people what happened (metrics, health, events, the status ConfigMap,
logs). The plan stage reads the cluster from its watch-fed cache (kube/cache.py: listed once when
this replica starts leading, then kept current by watches, listed again every run.resyncInterval),
cycles every `run.interval` and, in batches (`pod_batches.py`), soon after the cache's pod watch
sees pods become unschedulable; it plans only once the cache has listed every kind. The apply
stage reads the cluster live, every `run.interval` and as soon as `git ls-remote` says
`git.branch` moved. A failed cycle is logged and counted and the stage backs
off; only a bad config at start ends the process (exit 2). SIGTERM or Ctrl-C: the current step
finishes or is abandoned safely, the Leases are released, exit 0 (a second Ctrl-C: exit 130 at once).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config, load_config
from reconciler.domain.backoff import Backoff
from reconciler.domain.errors import OperationError, ReconcilerError, RefusedError, StopRequested, UserError
from reconciler.domain.event import EventSpec
from reconciler.gitops.proposal import OpenProposal, open_proposal
from reconciler.gitops.repo import WorkingCopy
from reconciler.kube.cache import KINDS as CACHE_KINDS
from reconciler.kube.cache import ClusterCache
from reconciler.kube.client import api_client, run_namespace
from reconciler.kube.control import SuspendedError, Switch
from reconciler.kube.errors import KubernetesError
from reconciler.kube.events import EventRecorder
from reconciler.kube.leader import LeaderElector
from reconciler.kube.status_configmap import PUSHED_KEY, STATUS_CONFIGMAP, StatusConfigMap
from reconciler.kube.wake_hint import KeyWatch
from reconciler.runtime.apply_stage import LoopHooks, apply_once
from reconciler.runtime.plan_stage import PlanRun, default_work_dir, plan_once
from reconciler.runtime.pod_batches import Batch, PodBatcher
from reconciler.runtime.shutdown import Shutdown
from reconciler.telemetry.events import apply_events, plan_events
from reconciler.telemetry.logs import SaidOnce
from reconciler.telemetry.metrics import Metrics
from reconciler.telemetry.server import Health, TelemetryServer
from reconciler.telemetry.status import StageResult, render_status, settle, status_document

_log = logging.getLogger("reconciler.run")

PLAN, APPLY = "plan", "apply"
_SLICE = 0.5  # seconds: how often a waiting stage looks at its triggers, the Lease and the stop request
# A plan refuses a cache picture not kept current for 3 run.interval (its watches and lists failing),
# and never for less than this: a relist after a 410 must not count as stale.
STALE_FLOOR = 10.0
_NAMED_GROUPS = 10  # node groups a "node groups: N found" line names; the rest are counted
_HINT_PACE = 1.0  # seconds: at most one ls-remote brought forward by wake-up hints per this


def error_kind(exc: BaseException) -> str:
    """A bounded label for what failed (metrics, logs): which outside system, or which answer."""
    if isinstance(exc, SuspendedError):
        return "suspended"
    if isinstance(exc, RefusedError):
        return "refused"
    if isinstance(exc, UserError):
        return "config"
    if isinstance(exc, OperationError):
        return exc.edge  # the edge's typed error says which system failed, never its message
    return "other"


@dataclass(frozen=True)
class _RestartOnly:
    """Keys read once at start: a change in the file is reported and waits for a restart."""

    cluster: str
    run: object
    kubernetes: object

    @staticmethod
    def of(config: Config) -> _RestartOnly:
        return _RestartOnly(config.cluster, config.run, config.kubernetes)


class ConfigSource:
    """The config file, read again at every cycle: most keys take effect at the next cycle; a file
    that changes the cluster, `run.*` or `kubernetes.*` waits whole for a restart (logged once). A
    file that no longer loads keeps the last good config and is reported until it is fixed."""

    def __init__(self, path: Path, config: Config, metrics: Metrics) -> None:
        self.path = path
        self.current = config
        self._fixed = _RestartOnly.of(config)
        self._metrics = metrics
        self._said = ""
        self._lock = threading.Lock()

    def read(self, stage: str) -> Config:
        with self._lock:
            try:
                fresh = load_config(self.path)
            except ReconcilerError as exc:
                self._metrics.error(stage, "config")
                self._say(f"config: {exc}; going on with the last good config until it is fixed", True)
                return self.current
            if _RestartOnly.of(fresh) != self._fixed:
                # Not half of it: a new cluster name with the old one's pods and new node groups
                # would plan one cluster's pods onto another's ASGs. The whole file waits.
                self._metrics.error(stage, "config")
                self._say(
                    f"config: {self.path}: cluster, run.* or kubernetes.* changed: the whole file takes "
                    "effect after a restart; going on with the config read before",
                    True,
                )
                return self.current
            if self._said:
                self._say("", False)
            self.current = fresh
            return fresh

    def _say(self, text: str, warn: bool) -> None:
        if text != self._said and warn:
            _log.warning("%s", text)
        self._said = text


class Stage:
    """One stage's thread: leadership, triggers, cycles, backoff."""

    def __init__(self, name: str, runner: Runner) -> None:
        self.name = name
        self.runner = runner
        config = runner.config
        self.lease_name = f"asg-reconciler-{name}-leader-{config.cluster}"
        self.elector = LeaderElector(
            runner.kube,
            runner.namespace,
            self.lease_name,
            runner.identity,
            lease_duration=config.run.lease_duration.total_seconds(),
            renew_deadline=config.run.renew_deadline.total_seconds(),
            retry_period=config.run.retry_period.total_seconds(),
            on_change=self._leadership,
        )
        self.wake = threading.Event()  # wakes the waiting thread: a trigger, a hint, the stop
        self.failures = 0
        self.wait = 0.0  # seconds the stage waits before its next cycle (backoff included)
        self.next_due = 0.0  # time.monotonic() of the next cycle
        self.next_poll = 0.0  # apply: time.monotonic() of the next `git ls-remote`
        self.last_summary = ""  # how the last cycle ended, to say a repeated answer once
        self.thread = threading.Thread(target=self._main, name=f"stage-{name}", daemon=True)
        self.tried_head: str | None = None  # apply: the tip ls-remote last saw and a cycle was started for
        self._poll_failed = False
        self._waiting_said = ""  # plan: what the cluster cache was last said to wait for
        self._waiting_since = 0.0
        self._flags = threading.Lock()
        self._triggered = False  # apply: the plan stage in this process pushed to main: cycle now
        self._hinted: str | None = None  # apply: the commit the plan-stage process says it pushed
        self._hint_ready = 0.0  # apply: time.monotonic() before which a hint waits (paced)
        self._woken_for: str | None = None  # apply: the hint that brought the next ls-remote forward

    def trigger(self) -> None:
        """Apply, both stages in this process: the plan stage pushed to main; cycle at once (no
        ls-remote needed: the push was ours)."""
        with self._flags:
            self._triggered = True
        self.wake.set()

    def hint(self, commit: str) -> None:
        """Apply, the split deployment: the plan-stage process says it pushed `commit` (the status
        ConfigMap's `plan-pushed`). Only brings the next `git ls-remote` forward: what the remote
        says is what counts, so a forged hint costs one early ls-remote, never a cycle."""
        with self._flags:
            self._hinted = commit
        self.wake.set()

    # --------------------------------------------------------------------------------- the thread

    def _leadership(self, leading: bool) -> None:
        self.runner.metrics.leader(self.name, leading)
        if self.name == PLAN:
            self.runner.follow_cache(leading)
        where = f"{self.runner.namespace}/{self.lease_name}"
        if leading:
            _log.info("%s: leading (Lease %s); cycling every %s", self.name, where, self.interval_text)
            self.next_due = 0.0  # a new leader cycles at once
        else:
            _log.info("%s: not the leader (Lease %s): waiting for it", self.name, where)

    @property
    def interval_text(self) -> str:
        return f"{self.runner.config.run.interval.total_seconds():g}s"

    def _main(self) -> None:
        try:
            self._serve()
        finally:  # however the thread ends, it never keeps a Lease it no longer acts on
            self.elector.stop(release=True)

    def _serve(self) -> None:
        shutdown = self.runner.shutdown
        self.runner.metrics.leader(self.name, False)  # until the elector says otherwise
        self.elector.start()
        _log.info("%s: waiting for the Lease %s/%s", self.name, self.runner.namespace, self.lease_name)
        while not shutdown.requested:
            self.runner.health.progress(self.name)
            if not self.elector.is_leader():
                if self.elector.observed:  # a follower that has read the Lease is ready: it stands by
                    self.runner.health.ready(self.name)
                self.elector.wait(_SLICE)
                continue
            try:
                if self._due() and not shutdown.requested:
                    self._cycle()
            except StopRequested:
                break
            except Exception:  # a bug must not end the loop: logged with its traceback, counted
                _log.exception("%s: unexpected error in the loop", self.name)
                self.runner.metrics.cycle(self.name, 0.0, "other")
                self._failed()

    def _due(self) -> bool:
        """Wait (in slices) for the next cycle: its time, or a trigger. False when something else
        needs the loop's attention first (leadership lost, stop requested)."""
        shutdown, config = self.runner.shutdown, self.runner.config
        poll = config.run.apply_poll_interval.total_seconds()
        while not shutdown.requested and self.elector.is_leader():
            self.runner.health.progress(self.name)
            if self.name == PLAN and not self._cache_synced():
                continue
            now = time.monotonic()
            if now >= self.next_due:
                return True
            if self.name == APPLY:
                self.wake.clear()  # what woke it is in the flags, read next
                if self._take_trigger():
                    return not shutdown.requested
                self._take_hint(now)
            if self.name == APPLY and now >= self.next_poll:
                self.next_poll = now + poll  # kept across calls: a failing poll never spins
                if self._main_moved():
                    return True
            batch_wait = _SLICE  # plan: seconds until the batch of new pending pods is due
            if self.name == PLAN:
                self.wake.clear()  # the batch says when; a new pod sets the wake again
                due = self.runner.batch_due()
                if due is not None and self.failures == 0:
                    if now >= due:
                        return True
                    batch_wait = due - now
            polling = (self.next_poll - now) if self.name == APPLY else _SLICE
            wait = max(0.01, min(_SLICE, self.next_due - now, polling, batch_wait))
            if self.wake.is_set():  # a trigger held back by the backoff: wait without it
                shutdown.sleep(wait)
            else:
                self.wake.wait(wait)
        return False

    def _cache_synced(self) -> bool:
        """Plan: has the cluster cache listed every kind? If not, say what it waits for (once per
        change) and wait a slice for it; a plan never starts from half a picture."""
        waiting = self.runner.cache_waiting()
        if not waiting:
            if self._waiting_said:
                took = time.monotonic() - self._waiting_since
                _log.info(
                    "plan: the cluster cache is synced (%s) after %.1fs", self.runner.cache_summary(), took
                )
                self._waiting_said = ""
            return True
        if not self._waiting_said:
            self._waiting_since = time.monotonic()
        if waiting != self._waiting_said:
            _log.info("plan: waiting for %s before planning", waiting)
            self._waiting_said = waiting
        self.wake.clear()  # the pods the cache reports meanwhile are planned once it is synced
        self.runner.cache_wait(_SLICE)
        return False

    def _take_trigger(self) -> bool:
        """The in-process trigger, unless the stage is backing off (it then waits for its time)."""
        with self._flags:
            if not self._triggered or self.failures:
                return False
            self._triggered = False
            return True

    def _take_hint(self, now: float) -> None:
        """A new hint brings the next ls-remote forward to now, or to `_HINT_PACE` after the last
        one it brought forward: a flood of forged hints is an ls-remote a second at most."""
        with self._flags:
            commit, self._hinted = self._hinted, None
        if commit is None or commit == self.tried_head:
            return  # nothing new: the cycle for it was started already
        at = max(now, self._hint_ready)
        if at < self.next_poll:
            self.next_poll = at
            self._woken_for = commit
        self._hint_ready = at + _HINT_PACE

    def _main_moved(self) -> bool:
        """`git ls-remote`: has git.branch moved since the last apply? A failing remote is logged
        once per outage and never ends the wait (the interval's cycle still comes)."""
        config = self.runner.config_now(APPLY)
        branch = config.git.branch
        try:
            head = self.runner.repo(APPLY, config).remote_head(branch)
        except Exception as exc:  # a poll that fails for any reason (an OSError too) is only a poll
            if not self._poll_failed:
                _log.warning("apply: cannot ask the remote whether main moved: %s (trying again)", exc)
            self._poll_failed = True
            return False
        _log.debug("apply: %s is at %s (last cycle started for %s)", branch, head, self.tried_head)
        if self._poll_failed:
            _log.info("apply: the remote answers again")
        self._poll_failed = False
        woken, self._woken_for = self._woken_for, None
        if head is not None and head != self.tried_head:
            if woken is not None:
                _log.info("apply: %s moved to %s (woken by the plan stage's push)", branch, head[:12])
            elif self.tried_head is not None:
                _log.info("apply: %s moved to %s", branch, head[:12])
                self.failures = 0  # a new commit is a new input: no backoff for it
            self.tried_head = head  # a failing cycle on this commit backs off; the next commit does not
            return True
        return False

    def _cycle(self) -> None:
        runner = self.runner
        config = runner.config_for(self.name)
        started, now = time.monotonic(), datetime.now(UTC)
        kind: str | None = None
        try:
            summary, commit, kind = self.body(config, now)
        except StopRequested:
            raise
        except KeyboardInterrupt:
            raise StopRequested from None
        except ReconcilerError as exc:
            kind = error_kind(exc)
            summary, commit = str(exc), ""
            if kind == "suspended":  # an answer, said when it changes: not a fault every cycle
                if summary != self.last_summary:
                    _log.warning("%s: not acting: %s", self.name, exc)
            elif kind == "refused":
                _log.info("%s: refused: %s", self.name, exc)
            else:
                _log.warning("%s: cycle failed (%s): %s", self.name, kind, exc)
        self.last_summary = summary
        if self.name == APPLY and commit:
            self.tried_head = commit  # what it applied: a poll or a hint naming it is nothing new
        seconds = time.monotonic() - started
        runner.metrics.cycle(self.name, seconds, kind)
        ok = kind is None
        result = StageResult(self.name, datetime.now(UTC), ok, summary, commit)
        runner.finished(result)
        if ok:
            runner.metrics.success(self.name, datetime.now(UTC))
        if ok or kind in ("refused", "suspended"):
            self.failures = 0
            self.wait = config.run.interval.total_seconds()
        else:
            self._failed()
            _log.info(
                "%s: next cycle in %gs (backing off: %d failed in a row)", self.name, self.wait, self.failures
            )
        self.next_due = time.monotonic() + self.wait
        runner.health.ready(self.name)
        runner.health.progress(self.name)

    def _failed(self) -> None:
        run = self.runner.config.run
        self.failures += 1
        interval = run.interval.total_seconds()
        longest = max(run.max_backoff.total_seconds(), interval)
        self.wait = Backoff(interval, longest).delay(self.failures - 1)
        self.next_due = time.monotonic() + self.wait

    def body(self, config: Config, now: datetime) -> tuple[str, str, str | None]:
        return (
            self.runner.plan_cycle(config, now) if self.name == PLAN else self.runner.apply_cycle(config, now)
        )


class Runner:
    """The process: the telemetry server, the stages, the pod watch, the signal handlers."""

    def __init__(self, path: Path, config: Config, *, identity: str | None = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.source = ConfigSource(path, config, self.metrics)
        self.identity = identity or f"{socket.gethostname()}_{secrets.token_hex(4)}"
        self.namespace = run_namespace(config)
        self.kube = api_client(config.kubernetes, parallel=8)
        self.shutdown = Shutdown(config.run.shutdown_grace_period.total_seconds())
        self.cache: ClusterCache | None = None  # the plan stage's, started while it leads
        self.stages = {name: Stage(name, self) for name in config.run.stages}
        self.health = Health(self.stages, self._stall_after, waiting=self._cache_readiness)
        self.server = TelemetryServer(config.run.metrics_address, self.metrics, self.health)
        timeout = config.kubernetes.request_timeout.total_seconds()
        self.events = EventRecorder(self.kube, host=socket.gethostname(), request_timeout=timeout)
        # one process with both stages writes `status`; the split deployment's two write `status-plan`
        # and `status-apply`, so neither overwrites the other's view every cycle
        key = "status" if len(self.stages) > 1 else f"status-{next(iter(self.stages))}"
        self.status = StatusConfigMap(self.kube, self.namespace, request_timeout=timeout, key=key)
        self.hint_watch: KeyWatch | None = None  # the split deployment's apply: the plan stage's pushes
        if APPLY in self.stages and PLAN not in self.stages:
            self.hint_watch = KeyWatch(
                self.kube,
                self.namespace,
                STATUS_CONFIGMAP,
                PUSHED_KEY,
                self.stages[APPLY].hint,
                request_timeout=timeout,
            )
        run = config.run
        if PLAN in self.stages:
            self._plan_wake = self.stages[PLAN].wake
            self.cache = ClusterCache(
                api_client(config.kubernetes, parallel=2 * len(CACHE_KINDS)),  # a watch per kind, lists
                page_size=config.kubernetes.page_size,
                autoscaler_names=(config.kubernetes.autoscaler_lease, config.kubernetes.autoscaler_status),
                resync=run.resync_interval.total_seconds(),
                on_unschedulable=self._unschedulable,
                request_timeout=timeout,
                stale_after=max(3 * run.interval.total_seconds(), STALE_FLOOR),
            )
            self.metrics.cluster_cache(self.cache.health)
        self._batch = PodBatcher(
            idle=run.debounce.total_seconds(),
            max_duration=run.batch_max_duration.total_seconds(),
            min_interval=run.batch_min_interval.total_seconds(),
        )
        self._batch_lock = threading.Lock()  # the cache's pod watch adds, the plan stage takes
        self._results: dict[str, StageResult] = {}
        self._aws: AwsReader | None = None  # the plan stage's, reused across cycles
        self._last_plan: PlanRun | None = None
        self._proposal: OpenProposal | None = None
        self._suspended = ""
        self._lock = threading.Lock()
        self._repos: dict[str, tuple[tuple[str, str, str], WorkingCopy]] = {}
        self._said = SaidOnce()  # standing warnings and decisions: logged once
        self._groups_seen: dict[str, int] = {}  # stage -> node groups its last cycle found

    # ----------------------------------------------------------------------------- the cluster cache

    def follow_cache(self, leading: bool) -> None:
        """The plan stage's leadership changed: a leader lists and watches the cluster; a follower
        does not (it would double the API server's cost for nothing), and a new leader starts from
        a fresh list."""
        if self.cache is None:
            return
        if leading:
            resync = self.config.run.resync_interval.total_seconds()
            _log.info("plan: listing the cluster, then watching it (listed again every %gs)", resync)
            self.cache.start()
        else:
            self.cache.stop(timeout=1.0)

    def cache_waiting(self) -> str:
        """What the plan stage's cache still waits for ("" when synced, or with no cache)."""
        return self.cache.waiting_for() if self.cache is not None else ""

    def cache_wait(self, seconds: float) -> None:
        if self.cache is not None and self.cache.running:
            self.cache.wait_synced(seconds)
        else:
            self.shutdown.sleep(seconds)

    def cache_summary(self) -> str:
        counts = {h.kind: h.objects for h in self.cache.health()} if self.cache is not None else {}
        return f"{counts.get('Node', 0)} nodes, {counts.get('Pod', 0)} pods"

    def _cache_readiness(self) -> str:
        """/readyz: while this replica leads the plan stage, its cache must have listed every kind."""
        plan = self.stages.get(PLAN)
        if self.cache is None or plan is None or not plan.elector.is_leader():
            return ""
        return self.cache.waiting_for()

    def _unschedulable(self, pod: str) -> None:
        """The cache's report: the pod joins the batch (a standby replica keeps it too: a new leader
        cycles at once). One line per pod at debug level; the batch is said once, when planned."""
        _log.debug("plan: pod %s is unschedulable", pod)
        with self._batch_lock:
            self._batch.add(pod, time.monotonic())
        self._plan_wake.set()

    def batch_due(self) -> float | None:
        """time.monotonic() at which the new pending pods are to be planned; None: there are none."""
        with self._batch_lock:
            return self._batch.due()

    def _take_batch(self) -> None:
        """At the start of a plan cycle: the pods reported so far are in the list it is about to make."""
        with self._batch_lock:
            now = time.monotonic()
            batch = self._batch.take(now)
        if batch is not None:
            waited = now - batch.opened
            since = datetime.now(UTC) - timedelta(seconds=waited)
            _log.info("plan: %s", describe_batch(batch, since, waited))

    def _stall_after(self, stage: str) -> float:
        """/healthz: three intervals without progress, plus whatever backoff the stage is in."""
        found = self.stages.get(stage)
        backoff = found.wait if found is not None and found.failures else 0.0
        return 3 * self.config.run.interval.total_seconds() + backoff

    # ----------------------------------------------------------------------------- configuration

    def config_for(self, stage: str) -> Config:
        """The config as the file says now, with the stage's own clone when both stages share the
        process (they never move each other's refs mid-cycle)."""
        return self._own_clone(stage, self.source.read(stage))

    def config_now(self, stage: str) -> Config:
        """The config as the last cycle read it (between cycles: the file is not read again)."""
        return self._own_clone(stage, self.source.current)

    def _own_clone(self, stage: str, config: Config) -> Config:
        if len(self.stages) > 1 and stage == APPLY:
            base = config.git.work_dir or str(default_work_dir(config))
            config = replace(config, git=replace(config.git, work_dir=f"{base}-apply"))
        return config

    def repo(self, stage: str, config: Config) -> WorkingCopy:
        """The stage's clone as `config` (the stage's, from config_for) names it: a changed git.url
        or work dir gets its own WorkingCopy."""
        work = Path(config.git.work_dir) if config.git.work_dir else default_work_dir(config)
        key = (stage, config.git.url, str(work))
        if self._repos.get(stage, (None,))[0] != key:
            self._repos[stage] = (key, WorkingCopy.from_config(config.git, work))
        return self._repos[stage][1]

    # ------------------------------------------------------------------------------------- cycles

    def plan_cycle(self, config: Config, now: datetime) -> tuple[str, str, str | None]:
        self._take_batch()
        run = plan_once(
            config,
            None,
            now,
            dry_run=False,
            guard=self._still_leading(PLAN),
            reader=self._aws_reader(config),
            cluster=self.cache.state if self.cache is not None else None,
            pushed=self._wake_apply,
        )
        self.metrics.aws_calls(run.aws_calls)
        plan = run.plan
        self._say_groups(PLAN, tuple(g.name for g in plan.groups), run.searched)
        decisions = tuple(
            f"{g.name} {g.action} {g.current} -> {g.desired} ({'; '.join(g.reasons) or 'no reason given'})"
            for g in plan.groups
            if g.action != "none" or g.cancelled_removals
        )
        for line in self._new_lines("plan-decisions", decisions):  # an open proposal: said once
            _log.info("plan: %s", line)
        published = run.published
        for note in published.notes if published is not None else ():
            _log.info("plan: %s", note)
        said = (run.searched,)  # where discovery looked: _say_groups said it, when the count changed
        for line in self._new_lines(PLAN, tuple(w for w in plan.warnings if w not in said)):
            _log.warning("plan: %s", line)
        self.metrics.plan(plan, now)
        try:
            proposal = open_proposal(
                self.repo(PLAN, config), config.cluster, config.git.branch, config.manifest_path
            )
        except ReconcilerError as exc:
            _log.warning("plan: cannot read the open proposal: %s", exc)
            proposal = self._proposal
        self._proposal = proposal
        self.metrics.proposals(
            1 if proposal else 0, proposal.age_seconds(datetime.now(UTC)) if proposal else None
        )
        pods = run.inventory.state.pods if run.inventory is not None else ()
        self._emit(
            plan_events(
                plan,
                proposed=proposal.removals if proposal else None,
                pod_uids={p.key: p.uid for p in pods if p.uid},
                proposal_branch=proposal.branch if proposal else "",
            )
        )
        with self._lock:
            self._last_plan = run
        main = published.main_commit if published is not None else None
        changed = [g for g in plan.groups if g.action != "none"]
        summary = ", ".join(f"{g.name} {g.current}->{g.desired}" for g in changed) or "no change"
        return summary, main or "", None

    def _wake_apply(self, commit: str) -> None:
        """The plan stage just pushed `commit` to main: apply acts on it at once. Here, in this
        process; else through the status ConfigMap's `plan-pushed`, which the apply-stage process
        watches (a hint: apply asks `git ls-remote` then, as it does at every poll)."""
        if APPLY in self.stages:
            self.stages[APPLY].trigger()
        elif not self.shutdown.requested:
            self.status.mark(PUSHED_KEY, commit, datetime.now(UTC))

    def apply_cycle(self, config: Config, now: datetime) -> tuple[str, str, str | None]:
        hooks = LoopHooks(stopping=self.shutdown.stopping, progress=lambda: self.health.progress(APPLY))
        try:
            run = apply_once(config, now, dry_run=False, hooks=hooks)
        except RefusedError as exc:
            self.metrics.refused("suspended" if isinstance(exc, SuspendedError) else str(exc))
            raise
        except BaseException:
            self._forget_groups()  # it may have changed a group before it failed
            raise
        finally:
            self._read_switch(config)
        report = run.report
        self.metrics.discovered(len(run.node_groups))
        self._say_groups(APPLY, run.node_groups, run.searched)
        if any(g.action != "none" for g in report.groups):
            self._forget_groups()  # our own write: the plan stage describes the groups again
        for group in report.groups:
            if group.action != "none":
                _log.info(
                    "apply: %s %s %d -> %d%s",
                    group.name,
                    group.action,
                    group.desired_before,
                    group.desired_after,
                    f" ({'; '.join(group.notes)})" if group.notes else "",
                )
        for line in report.given_back + report.stuck:
            _log.info("apply: %s", line)
        waiting = tuple(
            f"{g.name}: {', '.join(g.waiting)} approved, waiting for the scale-down window"
            for g in report.groups
            if g.waiting
        )
        for line in self._new_lines("apply-waiting", waiting):  # said once, not every cycle
            _log.info("apply: %s", line)
        for line in self._new_lines(APPLY, report.warnings):
            _log.warning("apply: %s", line)
        self.metrics.apply(report)
        self._emit(apply_events(report))
        if report.interrupted:
            raise StopRequested
        summary = ", ".join(f"{g.name} {g.action}" for g in report.groups if g.action != "none")
        code = report.exit_code
        kind = None if code == 0 else "refused" if code == 3 else "other"
        return summary or "in sync", report.commit, kind

    def _say_groups(self, stage: str, names: tuple[str, ...], searched: str) -> None:
        """One line when the number of node groups discovery finds changes (and at the first cycle):
        none found is a warning naming where it looked (a wrong region is the common cause)."""
        before = self._groups_seen.get(stage)
        self._groups_seen[stage] = len(names)
        if before == len(names):
            return
        was = "" if before is None else f" (was {before})"
        if not names:
            _log.warning(
                "%s: no node group found%s: %s", stage, was, searched.removeprefix("no node group found: ")
            )
            return
        shown = ", ".join(names[:_NAMED_GROUPS]) + (
            f" and {len(names) - _NAMED_GROUPS} more" if len(names) > _NAMED_GROUPS else ""
        )
        _log.info("%s: node groups: %d found%s: %s", stage, len(names), was, shown)

    def _aws_reader(self, config: Config) -> AwsReader:
        """The plan stage's AWS reader, kept across cycles so it can reuse ASG descriptions for
        aws.refreshInterval; a new one when the config's region changes."""
        with self._lock:
            if self._aws is None or not self._aws.fits(config):
                self._aws = AwsReader(config, reuse=True)
            return self._aws

    def _forget_groups(self) -> None:
        with self._lock:
            reader = self._aws
        if reader is not None:
            reader.invalidate()

    def _still_leading(self, stage: str) -> Callable[[], None]:
        elector = self.stages[stage].elector

        def guard() -> None:
            if not elector.is_leader():
                raise KubernetesError(
                    f"{stage}: lost the Lease {elector.where} during the cycle: nothing written "
                    "(the new leader plans from fresh state)"
                )

        return guard

    def _read_switch(self, config: Config) -> None:
        """The kill switch as it is at the end of an apply cycle, for the metrics and the status
        ConfigMap (apply itself reads it before every change)."""
        try:
            control = Switch(config, self.kube).read()
        except ReconcilerError as exc:
            _log.warning("apply: kill switch not read for the metrics: %s", exc)
            return
        self.metrics.suspensions(control.cluster is not None, control.groups)
        self._suspended = "; ".join(control.lines())

    def _new_lines(self, key: str, lines: tuple[str, ...]) -> list[str]:
        """Lines not logged under `key` by the previous cycle (telemetry.logs.SaidOnce)."""
        return self._said.new(key, lines)

    def _emit(self, events: list[EventSpec]) -> None:
        if events and not self.shutdown.requested:
            self.events.emit(events, datetime.now(UTC))

    def finished(self, result: StageResult) -> None:
        """After every cycle of any stage: the status ConfigMap, written only when it changed (not
        once stopping: an API server that hangs must not hold the stop for another timeout)."""
        if self.shutdown.requested:
            return
        now = datetime.now(UTC)
        with self._lock:
            self._results[result.stage] = settle(self._results.get(result.stage), result)
            last = self._last_plan
            proposal = self._proposal
            document = status_document(
                self.config.cluster,
                last.plan if last is not None else None,
                dict(self._results),
                proposal.removals if proposal else None,
                proposal.age_seconds(now) if proposal else None,
                self._suspended,
                inventory=last.inventory if last is not None else None,
                proposal_branch=proposal.branch if proposal else "",
                now=now,
            )
        self.status.publish(lambda room: render_status(document, room), now)  # 1 MiB at most

    # ------------------------------------------------------------------------------- the process

    def run(self) -> int:
        self.server.start()  # a bad address or a port in use: UserError, exit 2, nothing started
        with self._signals():
            if self.hint_watch is not None:
                self.hint_watch.start()
            for stage in self.stages.values():
                stage.thread.start()
            _log.info(
                "run: cluster %s, stages %s, namespace %s, identity %s, metrics %s",
                self.config.cluster,
                ", ".join(self.stages),
                self.namespace,
                self.identity,
                self.config.run.metrics_address or "off",
            )
            while not self.shutdown.requested:
                self.shutdown.sleep(_SLICE)
            _log.info("run: stopping: finishing or abandoning the current step safely")
            for stage in self.stages.values():
                stage.wake.set()
                stage.thread.join()
        self._bounded(lambda: self.events.flush(datetime.now(UTC)), 5.0)  # the folded repeats
        for stage in self.stages.values():
            stage.elector.stop(release=True)
        if self.cache is not None:
            self.cache.stop()
        if self.hint_watch is not None:
            self.hint_watch.stop()
        self.server.stop()
        _log.info("run: stopped; Leases released")
        return 0

    @staticmethod
    def _bounded(step: Callable[[], object], seconds: float) -> None:
        """A best-effort step on the way out, given at most `seconds` (a daemon thread: a hung API
        server cannot hold the exit)."""
        thread = threading.Thread(target=step, name="on-the-way-out", daemon=True)
        thread.start()
        thread.join(seconds)

    @contextmanager
    def _signals(self) -> Iterator[None]:
        def handle(signum: int, frame: object) -> None:
            name = signal.Signals(signum).name
            if self.shutdown.requested:
                if signum == signal.SIGINT:
                    os._exit(130)  # a second Ctrl-C: the person at the terminal means now
                _log.info("run: %s again: still stopping safely (a second Ctrl-C exits at once)", name)
                return  # a repeated SIGTERM (an init wrapper, a process group) must not cut a give-back
            _log.info("run: %s received", name)
            self.shutdown.request()

        previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def describe_batch(batch: Batch, since: datetime, waited: float) -> str:
    """One line for a batch of new pending pods: how many, since when (the first one, `waited`
    seconds ago), the first few by name."""
    noun = "pod" if batch.count == 1 else "pods"
    names = ", ".join(batch.first)
    more = batch.count - len(batch.first)
    if more > 0:
        names += f" and {more} more"
    return (
        f"planning {batch.count} new pending {noun} since {since.strftime('%H:%M:%S')}Z "
        f"({waited:.1f}s ago): {names}"
    )


def run_forever(path: Path) -> int:
    """Load the config (a bad one: UserError, exit 2) and serve its stages until stopped."""
    return Runner(path, load_config(path)).run()
