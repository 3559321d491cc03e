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

The config file is read by config_source.py and each stage's timing is stage_loop.py.
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
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.aws.reader import AwsReader
from reconciler.config.settings import Config, load_config
from reconciler.domain.errors import ReconcilerError, RefusedError, StopRequested
from reconciler.domain.event import EventSpec
from reconciler.gitops.proposal import OpenProposal, open_proposal
from reconciler.gitops.repo import WorkingCopy
from reconciler.kube.cache import KINDS as CACHE_KINDS
from reconciler.kube.cache import ClusterCache
from reconciler.kube.client import api_client, run_namespace
from reconciler.kube.control import Switch
from reconciler.kube.errors import KubernetesError
from reconciler.kube.events import EventRecorder
from reconciler.kube.status_configmap import PUSHED_KEY, STATUS_CONFIGMAP, StatusConfigMap
from reconciler.kube.wake_hint import KeyWatch
from reconciler.runtime.apply_stage import LoopHooks, apply_once
from reconciler.runtime.config_source import ConfigSource
from reconciler.runtime.plan_stage import PlanRun, default_work_dir, plan_once
from reconciler.runtime.pod_batches import Batch, PodBatcher
from reconciler.runtime.shutdown import Shutdown
from reconciler.runtime.stage_loop import APPLY, NAMED_GROUPS, PLAN, SLICE, STALE_FLOOR, Stage
from reconciler.telemetry.events import apply_events, plan_events
from reconciler.telemetry.logs import SaidOnce
from reconciler.telemetry.metrics import Metrics
from reconciler.telemetry.server import Health, TelemetryServer
from reconciler.telemetry.status import StageResult, render_status, settle, status_document

_log = logging.getLogger("reconciler.run")


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
                autoscaler_namespaces=config.kubernetes.autoscaler_namespaces,
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
        refused = published.refused if published is not None else ()
        for note in published.notes if published is not None else ():
            if note not in refused:
                _log.info("plan: %s", note)
        for line in self._new_lines("plan-refused", refused):  # said once, again when it changes
            _log.warning("plan: %s", line)
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
                status_configmap=(self.namespace, STATUS_CONFIGMAP),
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
            self.metrics.refused(exc.kind)  # the gate's kind, never the message's words
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
        shown = ", ".join(names[:NAMED_GROUPS]) + (
            f" and {len(names) - NAMED_GROUPS} more" if len(names) > NAMED_GROUPS else ""
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
                self.shutdown.sleep(SLICE)
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
