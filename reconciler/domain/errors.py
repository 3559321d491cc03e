"""The error kinds the CLI maps to exit codes (DESIGN §5.1): 2 bad input, 1 failed operation, 3 refused."""

from __future__ import annotations

from typing import Literal

# Which safety gate said no: a refusal's `kind`, its metrics label (telemetry/metrics.py says what
# each covers). Given where the refusal is made, never read from its message.
RefusalKind = Literal[
    "suspended",
    "not-approved",
    "expired",
    "rewritten",
    "busy",
    "limits",
    "another-writer",
    "lease",
    "instance-changed",
    "group-settings",
    "untrusted-records",
    "other",
]


class ReconcilerError(Exception):
    """Base: carries a one-line message meant for the user; never shown with a traceback."""

    exit_code = 1


class UserError(ReconcilerError):
    """Bad input or usage: the message names the file, the field and the fix."""

    exit_code = 2


class OperationError(ReconcilerError):
    """Something outside failed (AWS, the API server, Git): the message says what and why.

    Each edge raises its own subclass (kube/errors.py, aws/errors.py, gitops/errors.py), whose
    `edge` is the metrics label and log field for what failed: never derived from the message, so
    rewording one changes no metric."""

    exit_code = 1
    edge = "other"


class RefusedError(ReconcilerError):
    """A safety gate said no; `kind` says which one (the metrics label, never derived from the
    message, so rewording one changes no metric)."""

    exit_code = 3
    kind: RefusalKind = "other"

    def __init__(self, message: str = "", *, kind: RefusalKind | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class UncertainError(OperationError):
    """A change whose outcome cannot be told now (its answer was lost and the system cannot be
    asked): callers must assume it may have happened."""


class StopRequested(KeyboardInterrupt):
    """The `run` loop is stopping (SIGTERM, Ctrl-C): a step that cannot finish within the grace
    period ends the way a one-shot apply's SIGTERM ends it (drains give their nodes back)."""
