"""What happens to the planner's scale-downs: the two policies `simulate` compares.

- `Reviewed` (ours): a proposal opens naming the instances; a person approves it after a delay the
  `ApprovalModel` draws; what the plan still proposes then is approved and removed at the next step
  that apply's gates allow (a later plan may still cancel it; apply's re-check may hold it back
  while its node is busy again), inside scale-down windows if any. Scale-ups are raised as apply
  raises them: at most apply.maxStep per group per step.
- `Autoscaler` (cluster-autoscaler-like): every removal the plan names is drained and terminated at
  once. The planner has already waited scaleDown.unneededTime, as CA does. Scale-ups all at once.

Both apply scale-ups at the step that plans them. Pure: delays are drawn from seeded generators
named by (seed, what, index), so a run never depends on another's draws.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from reconciler.domain.durations import format_duration, parse_duration
from reconciler.domain.errors import UserError

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

# How many approved removals may be applied now (None: any number; 0: none, e.g. outside every
# scale-down window). Built from scaleDown.windows by the stage that has the config.
RemovalBudget = Callable[[datetime], int | None]


@dataclass(frozen=True)
class WorkingHours:
    """When reviewers act: [start, end) local time on the given weekdays (0 = Monday)."""

    start: time
    end: time
    zone: tzinfo
    weekdays: frozenset[int]

    def next_open(self, moment: datetime) -> tuple[datetime, datetime]:
        """The working interval holding `moment`, else the next one: (from, until), both aware."""
        day = moment.astimezone(self.zone).date() - timedelta(days=1)  # an overnight shift may hold it
        for _ in range(16):  # at least one weekday in any fortnight when weekdays is not empty
            if day.weekday() in self.weekdays:
                opens, closes = self._interval(day)
                if closes > moment:
                    return max(opens, moment), closes
            day += timedelta(days=1)
        raise ValueError("working hours have no weekday")

    def _interval(self, day: date) -> tuple[datetime, datetime]:
        """Converted to UTC so that adding a duration is elapsed time, across DST changes too."""
        opens = datetime.combine(day, self.start, self.zone)
        closes = datetime.combine(
            day if self.end > self.start else day + timedelta(days=1), self.end, self.zone
        )
        return opens.astimezone(UTC), closes.astimezone(UTC)

    def add(self, moment: datetime, working: timedelta) -> datetime:
        """`moment` plus `working` time counted only inside working hours."""
        left = working
        while True:
            opens, closes = self.next_open(moment)
            if opens + left <= closes:
                return opens + left
            left -= closes - opens
            moment = closes


@dataclass(frozen=True)
class ApprovalModel:
    """A proposal is approved `within` after it opens: a uniform draw in [0, within] (or exactly
    `within` when `fixed`), counted in working hours when they are given."""

    within: timedelta = timedelta(hours=4)
    fixed: bool = False
    working_hours: WorkingHours | None = None

    def approves_at(self, opened: datetime, seed: int, index: int) -> datetime:
        delay = self.within
        if not self.fixed:
            draw = random.Random(f"{seed}:approval:{index}").random()
            delay = timedelta(seconds=round(draw * self.within.total_seconds()))
        if self.working_hours is None:
            return opened + delay
        return self.working_hours.add(opened, delay)

    def describe(self) -> str:
        how = (
            f"after {format_duration(self.within)}"
            if self.fixed
            else f"within {format_duration(self.within)}"
        )
        hours = self.working_hours
        if hours is None:
            return f"approved {how}"
        days = _days(hours.weekdays)
        return f"approved {how} of working time ({hours.start:%H:%M}-{hours.end:%H:%M} {days}, {hours.zone})"


@dataclass(frozen=True)
class Reviewed:
    """Ours: scale-downs wait for a person's approval, then for a scale-down window."""

    approval: ApprovalModel = ApprovalModel()
    budget: RemovalBudget | None = None
    name: str = "ours"

    def describe(self) -> str:
        windows = ", inside scale-down windows" if self.budget is not None else ""
        return f"reviewed scale-downs ({self.approval.describe()}{windows})"


@dataclass(frozen=True)
class Autoscaler:
    """cluster-autoscaler-like: scale-downs applied as soon as the planner names them."""

    name: str = "ca"

    def describe(self) -> str:
        return "cluster-autoscaler-like (scale-down at once after scaleDown.unneededTime)"


Policy = Reviewed | Autoscaler


@dataclass(frozen=True)
class ProvisioningModel:
    """How long a launched instance takes to become a Ready node: fixed per instance type where
    given, else a lognormal draw (median `median`, shape `sigma`) clipped to [low, high]. The n-th
    launch of a group draws the same delay under every policy, so policies differ only by what they
    decide."""

    fixed: tuple[tuple[str, float], ...] = ()  # (instance type or "*", seconds)
    median: float = 90.0
    sigma: float = 0.35  # p95 ~160 s, p99 ~200 s: EKS nodes usually join in 1-3 minutes
    low: float = 30.0
    high: float = 600.0

    def delay(self, instance_type: str, seed: int, group: str, index: int) -> float:
        table = dict(self.fixed)
        if instance_type in table:
            return table[instance_type]
        if "*" in table:
            return table["*"]
        draw = random.Random(f"{seed}:provision:{group}:{index}").lognormvariate(0.0, self.sigma)
        return min(max(self.median * draw, self.low), self.high)

    def describe(self) -> str:
        table = dict(self.fixed)
        parts = [
            f"{kind if kind != '*' else 'every type'} {format_duration(timedelta(seconds=s))}"
            for kind, s in table.items()
        ]
        if "*" not in table:
            parts.append(
                f"lognormal median {self.median:g}s (sigma {self.sigma:g})" + (" otherwise" if parts else "")
            )
        return "; ".join(parts)


def _days(weekdays: frozenset[int]) -> str:
    ordered = sorted(weekdays)
    if ordered and ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{WEEKDAYS[ordered[0]]}-{WEEKDAYS[ordered[-1]]}"
    return ",".join(WEEKDAYS[d] for d in ordered)


# ------------------------------------------------------------------------------------------ options


def parse_weekdays(text: str, option: str = "--weekdays") -> frozenset[int]:
    """`mon-fri`, `mon,wed,fri`, `sat-sun` or `mon-sun` (0 = Monday)."""
    days: set[int] = set()
    for part in text.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        try:
            low = WEEKDAYS.index(first)
            high = WEEKDAYS.index(last) if last else low
        except ValueError:
            raise UserError(
                f"{option}: {text!r} is not a list of weekdays (use e.g. mon-fri or mon,wed,fri)"
            ) from None
        days.update(range(low, high + 1) if low <= high else [*range(low, 7), *range(0, high + 1)])
    return frozenset(days)


def parse_working_hours(text: str, zone: tzinfo, weekdays: frozenset[int]) -> WorkingHours:
    """`09:00-17:00` on `weekdays` in `zone`."""
    first, _, last = text.partition("-")
    try:
        start, end = time.fromisoformat(first.strip()), time.fromisoformat(last.strip())
    except ValueError:
        raise UserError(
            f"--working-hours: {text!r} is not a span of the day (use HH:MM-HH:MM, e.g. 09:00-17:00)"
        ) from None
    if start == end:
        raise UserError(f"--working-hours: {text!r} is empty (start and end are equal; use e.g. 09:00-17:00)")
    if not weekdays:
        raise UserError("--weekdays: no day given (use e.g. mon-fri)")
    return WorkingHours(start, end, zone, weekdays)


_DAYS = re.compile(r"^([0-9]+)d")


def parse_duration_option(text: str, option: str) -> timedelta:
    """A simulate option's duration: Go's (90s, 10m, 4h, 1h30m) with days in front (2d, 1d12h), as
    `history --since` takes them: a trace may span weeks."""
    days = _DAYS.match(text.strip())
    rest = text.strip()[days.end() :] if days else text
    try:
        value = (timedelta(days=int(days[1])) if days else timedelta(0)) + (
            parse_duration(rest) if rest or not days else timedelta(0)
        )
    except (ValueError, OverflowError):
        raise UserError(f"{option}: {text!r} is not a duration (use e.g. 90s, 10m, 4h or 2d)") from None
    if value < timedelta(0):
        raise UserError(f"{option}: {text!r} is negative (use e.g. 90s)")
    return value


def parse_provisioning(items: tuple[str, ...]) -> ProvisioningModel:
    """`--provisioning-delay [TYPE=]DURATION`, repeated: a fixed delay for one instance type, or for
    every type without TYPE; types not named keep the lognormal draw."""
    fixed: dict[str, float] = {}
    for item in items:
        kind, _, text = item.rpartition("=")
        seconds = parse_duration_option(text, f"--provisioning-delay {item}").total_seconds()
        fixed[kind or "*"] = seconds
    return ProvisioningModel(fixed=tuple(sorted(fixed.items())))
