"""What one-shot plan runs must remember between runs, kept on `asg-reconciler/<cluster>/state`.

A CI job has no memory, so "unneeded for 10 minutes" and "back off this group after a failed
scale-up" need somewhere to live (DESIGN §3 rule 9). The branch holds one small JSON file, written
in a canonical form so an unchanged state is an unchanged file, and committed only when it changes:
no commit per run, no noise. Two writers racing: the later one re-reads and writes its own view (the
state is a cache of observations, not a ledger).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.config.documents import JSON_TOO_DEEP
from reconciler.domain.errors import UserError
from reconciler.gitops.repo import Update, WorkingCopy
from reconciler.planning.types import Backoff  # the planner's own record, stored as is

STATE_FILE = "state.json"
FORMAT_VERSION = 1


def state_branch(cluster: str) -> str:
    return f"asg-reconciler/{cluster}/state"


@dataclass(frozen=True)
class State:
    """`since`: name -> when it first became unneeded; `backoffs`: group -> until when, how often."""

    since: Mapping[str, datetime] = field(default_factory=dict)
    backoffs: Mapping[str, Backoff] = field(default_factory=dict)


EMPTY = State()


def encode(state: State) -> str:
    """Canonical JSON: sorted keys, UTC seconds, so equal states are equal texts."""
    data = {
        "version": FORMAT_VERSION,
        "since": {name: _iso(when) for name, when in sorted(state.since.items())},
        "backoffs": {
            group: {"until": _iso(b.until), "count": b.count} for group, b in sorted(state.backoffs.items())
        },
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def decode(text: str, label: str) -> State:
    """The state in `text`; a broken file is a UserError (a person can delete the branch to reset)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"expected version {FORMAT_VERSION}")
        return State(
            since={str(k): _time(v) for k, v in _mapping(data.get("since")).items()},
            backoffs={
                str(k): Backoff(_time(v["until"]), int(v["count"]))
                for k, v in _mapping(data.get("backoffs")).items()
            },
        )
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        problem = JSON_TOO_DEEP if isinstance(exc, RecursionError) else exc
        raise UserError(
            f"{label}: not a valid state file ({problem}); delete the state branch to start over"
        ) from None


def load_state(copy: WorkingCopy, cluster: str) -> State:
    """The state on the fetched state branch; EMPTY when there is none yet."""
    branch = state_branch(cluster)
    text = copy.read_file(STATE_FILE, branch) if copy.head(branch) else None
    return EMPTY if text is None else decode(text, f"{branch}:{STATE_FILE}")


def save_state(copy: WorkingCopy, cluster: str, state: State) -> str | None:
    """Commit `state` when it differs from the branch's; the new commit, or None if nothing changed."""
    text = encode(state)

    def change(current: str | None) -> Update | None:
        if current == text:
            return None
        return Update(text, state_message(cluster, state))

    return copy.update(state_branch(cluster), STATE_FILE, change)


def state_message(cluster: str, state: State) -> str:
    return (
        f"state({cluster}): unneeded nodes {len(state.since)}, group backoffs {len(state.backoffs)}\n\n"
        "Written by asg-reconciler so one-shot runs remember timers; not a capacity change.\n"
    )


def _iso(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _time(value: Any) -> datetime:
    when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _mapping(value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError("expected a mapping")
    return value
