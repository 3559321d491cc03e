"""A group's capacity before this plan decides anything (DESIGN §3 rule 1).

capacity = AWS DesiredCapacity
         + an increase committed on main but not yet applied (upcoming)
         - instances whose approved removal is not yet applied (still present in the ASG)

A desired value lowered by hand without naming instances is not a decrease yet: it is reported as
`manual_decrease`, which the next plan turns into a named proposal (rule 2).

An instance in Standby is outside DesiredCapacity (AWS does not count it, whether it entered Standby
with a decrement or was replaced), so an approved removal of one is not subtracted from desired:
counting it would make apply raise desired by one for an instance it then cannot drain.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.domain.model import NodeGroup
from reconciler.planning.types import CommittedGroup


@dataclass(frozen=True)
class Baseline:
    aws_desired: int
    unapplied_increase: int
    approved_present: tuple[str, ...]  # approved removals still in the ASG, in manifest order
    approved_gone: tuple[str, ...]  # approved removals already applied (instance no longer there)
    manual_decrease: int
    held: bool
    approved_standby: tuple[str, ...] = ()  # approved removals whose instance a person put in Standby

    @property
    def capacity(self) -> int:
        return self.aws_desired + self.unapplied_increase - len(self.approved_present)


def baseline(group: NodeGroup, committed: CommittedGroup | None) -> Baseline:
    if committed is None:
        return Baseline(group.desired, 0, (), (), 0, False)
    states = {i.instance_id: i.lifecycle_state for i in group.instances}
    present = {i for i, state in states.items() if state not in GONE and state not in STANDBY}
    standby = {i for i, state in states.items() if state in STANDBY}
    approved_present = tuple(i for i in committed.remove_instances if i in present)
    approved_standby = tuple(i for i in committed.remove_instances if i in standby)
    approved_gone = tuple(i for i in committed.remove_instances if i not in present and i not in standby)
    # The committed desired already subtracts the approved removals still present.
    intended = committed.desired + len(approved_present)
    return Baseline(
        aws_desired=group.desired,
        unapplied_increase=max(0, intended - group.desired),
        approved_present=approved_present,
        approved_gone=approved_gone,
        manual_decrease=max(0, group.desired - intended),
        held=committed.hold,
        approved_standby=approved_standby,
    )


STANDBY = frozenset({"Standby", "EnteringStandby"})
GONE = frozenset({"Terminating", "Terminating:Wait", "Terminating:Proceed", "Terminated"})
