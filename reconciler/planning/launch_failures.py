"""Launches that fail: whether AWS could not launch a group's unfilled desired, and how long the
group is backed off for it, derived from the failed activities' own times (DESIGN §3 rule 12).

Nothing is remembered between plans: the failures are AWS's records, so a one-shot CI plan, the
`run` loop after a restart and `status` all find the same backoff. The schedule is
cluster-autoscaler's exponential backoff (utils/backoff/exponential_backoff.go) replayed over the
failures since the group's last successful launch, oldest first:

- the first failure, or one more than scaleUp.backoffResetTimeout (3h) after the one before it,
  backs off for scaleUp.initialBackoff (5m);
- a failure after the running backoff ended doubles it, up to scaleUp.maxBackoff (30m);
- a failure while backed off (AWS retrying by itself, several failed attempts of one raise) keeps
  the duration and never shortens the backoff.

A successful launch since the failures ends it (CA removes a group's backoff when a scale-up of it
succeeds). The failure only counts while the group still has desired without instances: once AWS
filled it (late) or it went down, the failure is history; so is a newest failure older than
scaleUp.backoffResetTimeout (CA forgets such backoff data), e.g. one from before a later raise that
AWS has not tried yet.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from reconciler.config.settings import ScaleUpConfig
from reconciler.domain.model import LaunchActivity, NodeGroup
from reconciler.planning.types import LaunchFailure


def launch_failure(group: NodeGroup, settings: ScaleUpConfig, now: datetime) -> LaunchFailure | None:
    """The group's current launch failure with its backoff, or None (no unfilled desired, no failed
    launch since the last successful one, or none within scaleUp.backoffResetTimeout of `now`). The
    backoff may have ended: `until` <= now then."""
    if not group.unfilled:
        return None
    failures: list[LaunchActivity] = []
    for activity in sorted(group.launches, key=lambda a: a.start, reverse=True):  # newest first
        if activity.succeeded:
            break
        if activity.failed:
            failures.append(activity)
    if not failures or now - failures[0].start > settings.backoff_reset_timeout:
        return None
    failures.reverse()
    initial, longest, reset = settings.initial_backoff, settings.max_backoff, settings.backoff_reset_timeout
    duration = timedelta(0)
    until: datetime | None = None
    since = failures[0].start
    previous: datetime | None = None
    for failure in failures:
        at = failure.start
        if previous is None or at - previous > reset:
            duration, until, since = initial, None, at
        elif until is not None and until <= at:
            duration = min(duration * 2, max(longest, initial))
        end = at + duration
        until = end if until is None or end > until else until
        previous = at
    assert until is not None
    count = sum(1 for f in failures if f.start >= since)
    return LaunchFailure(failures[-1], since, count, until, group.unfilled)
