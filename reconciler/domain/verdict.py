"""An approval gate's answer on one commit (apply/approval/ asks the gates; gitops's `approve` shows it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """Whether commit C is approved, by whom (a signer principal, reviewers, or "branch protection"),
    and one line saying why; when refused, the line names what would approve it."""

    approved: bool
    by: str
    reason: str
