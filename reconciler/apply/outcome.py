"""What an apply run did, group by group, and the exit code that says it (DESIGN §5.1)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from reconciler.domain.errors import RefusalKind

SCALE_UP, SCALE_DOWN, NONE, REFUSED, FAILED = "scale-up", "scale-down", "none", "refused", "failed"


@dataclass(frozen=True)
class GroupOutcome:
    name: str
    action: str  # scale-up | scale-down | none | refused | failed
    desired_before: int
    desired_after: int
    terminated: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    adopted: bool = False  # apply.drift adopt: desired_after is the value changed outside the tool
    # approved removals held back by scaleDown.windows, still approved: waiting, not refused
    waiting: tuple[str, ...] = ()
    # the kind of each refusal among the notes, as the gate gave it (metrics count these, never the
    # notes' words)
    refusals: tuple[RefusalKind, ...] = ()


@dataclass(frozen=True)
class ApplyReport:
    commit: str
    dry_run: bool
    groups: tuple[GroupOutcome, ...]
    warnings: tuple[str, ...] = ()
    given_back: tuple[str, ...] = ()  # nodes whose drain taint this run removed, with why
    stuck: tuple[str, ...] = ()  # nodes still carrying the drain taint because removing it failed
    interrupted: bool = False  # SIGTERM or Ctrl-C stopped the removals (exit 130)
    in_flight: tuple[str, ...] = ()  # interrupted with these terminate calls made but not answered
    # interrupted (a second signal) inside these SetDesiredCapacity calls: (group, before, target),
    # whether AWS took them is not known; recorded as intents the next run resolves from AWS
    raising: tuple[tuple[str, int, int], ...] = ()

    @property
    def exit_code(self) -> int:
        """DESIGN §5.1: 1 if any group failed (or a node could not be given back), else 3 if any was
        refused, else 0; 130 (as a shell reports a SIGINT) when interrupted. A removal waiting for a
        scale-down window is not a refusal: alone, it leaves the run at 0."""
        if self.interrupted:
            return 130
        actions = {g.action for g in self.groups}
        return 1 if FAILED in actions or self.stuck else 3 if REFUSED in actions else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "dryRun": self.dry_run,
            "nodeGroups": [
                {
                    "name": g.name,
                    "action": g.action,
                    "desiredBefore": g.desired_before,
                    "desiredAfter": g.desired_after,
                    "terminated": list(g.terminated),
                    "notes": list(g.notes),
                    "adopted": g.adopted,
                    "waitingForWindow": list(g.waiting),
                }
                for g in self.groups
            ],
            "givenBack": list(self.given_back),
            "stuck": list(self.stuck),
            "interrupted": self.interrupted,
            "warnings": list(self.warnings),
        }


@dataclass
class GroupRun:
    """One group's run: what it did so far, what it noted, whether something refused or failed."""

    name: str
    before: int
    after: int
    action: str = NONE
    terminated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: bool = False
    failed: bool = False
    adopted: bool = False
    waiting: list[str] = field(default_factory=list)
    refusals: list[RefusalKind] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def did(self, action: str, note: str = "") -> None:
        with self._lock:
            if self.action == NONE:
                self.action = action
            if note:
                self.notes.append(note)

    def terminated_one(self, instance: str, note: str) -> None:
        """An instance terminated with decrement: desired is one lower (drains finish in threads)."""
        with self._lock:
            self.after -= 1
            self.terminated.append(instance)
        self.did(SCALE_DOWN, note)

    def note(self, note: str) -> None:
        with self._lock:
            self.notes.append(note)

    def refuse(self, note: str, kind: RefusalKind) -> None:
        """A gate said no: `note` says why (records, logs), `kind` which gate (metrics)."""
        with self._lock:
            self.refused = True
            self.notes.append(note)
            self.refusals.append(kind)

    def fail(self, note: str) -> None:
        with self._lock:
            self.failed = True
            self.notes.append(note)

    def wait(self, instance: str, why: str) -> None:
        """An approved removal held back by scaleDown.windows: noted, still approved, not refused."""
        with self._lock:
            self.waiting.append(instance)
            self.notes.append(f"{instance}: {why}")

    def outcome(self) -> GroupOutcome:
        action = FAILED if self.failed else REFUSED if self.refused else self.action
        return GroupOutcome(
            self.name,
            action,
            self.before,
            self.after,
            tuple(self.terminated),
            tuple(self.notes),
            self.adopted,
            tuple(self.waiting),
            tuple(self.refusals),
        )
