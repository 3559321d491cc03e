"""The seams through which apply changes or looks again at anything (AWS, the cluster, the gate,
the Lease, the records), so reconciler/apply/ holds the decisions and tests can watch them against
moto and the fake Kubernetes API."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from reconciler.domain.inventory import Inventory


class Actuator(Protocol):
    def raise_desired(self, name: str, expected: int, desired: int) -> object: ...
    def terminate(self, name: str, instance_id: str) -> object: ...


class Drainer(Protocol):
    def mark(self, node: str, commit: str, *, instance: str | None = None) -> None: ...
    def drain(
        self,
        node: str,
        *,
        vet: Callable[[Sequence[Mapping[str, Any]]], str | None] | None = None,
        check: Callable[[], None] | None = None,
        instance: str | None = None,
    ) -> DrainOutcome: ...
    def unmark(self, node: str) -> None: ...
    def marked(self) -> dict[str, str]: ...
    def remaining(self, node: str) -> list[dict[str, Any]]: ...
    def instance_of(self, node: str) -> str | None: ...


class DrainOutcome(Protocol):
    @property
    def complete(self) -> bool: ...
    @property
    def reason(self) -> str: ...


class Gate(Protocol):
    def approves(self, commit: str) -> tuple[bool, str]: ...


@dataclass(frozen=True)
class Effects:
    """The seams through which a run changes or looks again at anything.

    `guard(group)` runs before every change to that group (the Lease still ours, the kill switch
    off for the cluster and the group: it raises otherwise);
    `observe` gives the cluster and the ASGs as they are now (the re-checks before each batch);
    `intend` records that an instance is about to be terminated, before the call (write-ahead);
    `refreshing(group)`: an instance refresh is under way in the group (asked only when the answer
    matters: apply is about to change it);
    `stopping(finishes_by)`: the `run` loop is stopping and a step that ends by `finishes_by`
    (time.monotonic) would not end within its grace period: the step is abandoned safely;
    `clock()`: the time now, for a batch that starts later in the run (scaleDown.windows).

    Every write behind these seams reads apply's Lease first, below the decisions made here: the
    drainer and the actuator are built (runtime/apply_stage.py `_writers`) on clients that check the
    Lease before any call that changes something, and `intend` checks before its push. A lost
    Lease raises LeaseLost (not an Exception): nothing here may catch it and tidy up.
    """

    actuator: Actuator
    drainer: Drainer
    gate: Gate
    guard: Callable[[str], None] = lambda group: None
    observe: Callable[[], Inventory] | None = None
    intend: Callable[[str, str, int, int], None] = lambda group, instance, before, after: None
    # whether an instance is going away (terminating, shut down, gone): its node keeps our taint
    going_away: Callable[[str], bool] = lambda instance: False
    stopping: Callable[[float], bool] = lambda finishes_by: False
    # whether an instance refresh is replacing the group's instances, asked of AWS right before
    # apply would change the group (one DescribeInstanceRefreshes each, only for groups it changes)
    refreshing: Callable[[str], bool] = lambda group: False
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    # around one AWS write whose outcome must be recorded: a first SIGINT/SIGTERM arriving meanwhile
    # waits for the call's answer and is raised (KeyboardInterrupt) when the block ends; a second one
    # interrupts at once (runtime/apply_stage.py)
    shield: Callable[[], AbstractContextManager[None]] = nullcontext
