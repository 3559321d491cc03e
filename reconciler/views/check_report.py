"""What `check` found, as data: built by runtime/check_stage.py, shown by views/check.py and as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.apply.outcome import ApplyReport

ALREADY_ON_BRANCH = "on-branch"
FAST_FORWARD = "fast-forward"
MERGE = "merge"


@dataclass(frozen=True)
class GateLine:
    """The gate's verdict on one removal REF brings: which commit would bring it, and the answer."""

    group: str
    instance: str
    commit: str
    approved: bool
    reason: str


@dataclass(frozen=True)
class CheckReport:
    ref: str  # as given
    commit: str  # what it resolved to
    branch: str
    tip: str  # the branch's tip it was judged against
    landing: str  # ALREADY_ON_BRANCH | FAST_FORWARD | MERGE
    manifest_path: str
    approval_mode: str
    landed: str = ""  # the commit judged as the branch's new tip (MERGE: made here, never pushed)
    errors: tuple[str, ...] = ()  # validate's
    warnings: tuple[str, ...] = ()
    verdicts: tuple[GateLine, ...] = ()
    gate_error: str = ""  # the gate could not be asked (its settings, git, the forge)
    gate_error_code: int = 0
    dry_run: ApplyReport | None = None
    dry_run_error: str = ""  # apply refused or failed before it reached the groups
    dry_run_error_code: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        """DESIGN §5.1: 2 for a broken manifest or config, else 1 if something failed, else 3 if a
        gate refused (REF's removal unapproved, or the dry run refused), else 0."""
        if self.errors:
            return 2
        codes = {self.gate_error_code, self.dry_run_error_code}
        if self.dry_run is not None:
            codes.add(self.dry_run.exit_code)
        if any(not v.approved for v in self.verdicts):
            codes.add(3)
        for code in (2, 1, 130, 3):
            if code in codes:
                return code
        return 0
