"""One stage of `run` (plan or apply) on its own thread: when its cycle is due (the interval, batched
unschedulable pods, a wake-up hint, main moving), its backoff after a failure, and what it tells the
health server while it waits. The cycle itself is the Runner's (run_loop.py).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from reconciler.config.settings import Config
from reconciler.domain.backoff import Backoff
from reconciler.domain.errors import OperationError, ReconcilerError, RefusedError, StopRequested, UserError
from reconciler.domain.lease_names import leader_lease_name
from reconciler.kube.control import SuspendedError
from reconciler.kube.leader import LeaderElector
from reconciler.telemetry.status import StageResult

if TYPE_CHECKING:  # the Runner owns its stages: only a type here
    from reconciler.runtime.run_loop import Runner


_log = logging.getLogger("reconciler.run")

PLAN, APPLY = "plan", "apply"
SLICE = 0.5  # seconds: how often a waiting stage looks at its triggers, the Lease and the stop request
# A plan refuses a cache picture not kept current for 3 run.interval (its watches and lists failing),
# and never for less than this: a relist after a 410 must not count as stale.
STALE_FLOOR = 10.0
NAMED_GROUPS = 10  # node groups a "node groups: N found" line names; the rest are counted
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


class Stage:
    """One stage's thread: leadership, triggers, cycles, backoff."""

    def __init__(self, name: str, runner: Runner) -> None:
        self.name = name
        self.runner = runner
        config = runner.config
        self.lease_name = leader_lease_name(name, config.cluster)
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
                self.elector.wait(SLICE)
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
            batch_wait = SLICE  # plan: seconds until the batch of new pending pods is due
            if self.name == PLAN:
                self.wake.clear()  # the batch says when; a new pod sets the wake again
                due = self.runner.batch_due()
                if due is not None and self.failures == 0:
                    if now >= due:
                        return True
                    batch_wait = due - now
            polling = (self.next_poll - now) if self.name == APPLY else SLICE
            wait = max(0.01, min(SLICE, self.next_due - now, polling, batch_wait))
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
        self.runner.cache_wait(SLICE)
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
            # the pace counts only hints that brought an ls-remote forward: a flood of forged
            # values moves it one second per ls-remote, never pushes it ahead of the genuine hint
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
