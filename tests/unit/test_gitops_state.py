"""The state file: canonical text, so an unchanged state is an unchanged file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.domain.errors import UserError
from reconciler.gitops.state import EMPTY, Backoff, State, decode, encode, state_branch

T = datetime(2024, 6, 1, 12, 0, 5, tzinfo=UTC)


def test_round_trip_and_canonical_form() -> None:
    state = State(
        since={"ip-2": T, "ip-1": T - timedelta(minutes=3)},
        backoffs={"asg-a": Backoff(T + timedelta(minutes=5), 2)},
    )
    text = encode(state)
    assert decode(text, "x") == state
    assert text == (
        "{\n"
        '  "backoffs": {\n    "asg-a": {\n      "count": 2,\n'
        '      "until": "2024-06-01T12:05:05Z"\n    }\n  },\n'
        '  "since": {\n    "ip-1": "2024-06-01T11:57:05Z",\n    "ip-2": "2024-06-01T12:00:05Z"\n  },\n'
        '  "version": 1\n}\n'
    )
    # insertion order, time zones and sub-second noise do not change the text
    same = State(
        since={
            "ip-1": (T - timedelta(minutes=3)).astimezone(timezone(timedelta(hours=9))),
            "ip-2": T.replace(microsecond=7),
        },
        backoffs={"asg-a": Backoff(T + timedelta(minutes=5), 2)},
    )
    assert encode(same) == text
    assert encode(EMPTY) == '{\n  "backoffs": {},\n  "since": {},\n  "version": 1\n}\n'
    assert state_branch("prod") == "asg-reconciler/prod/state"


@pytest.mark.parametrize(
    "text", ["not json", "[]", '{"version": 2}', '{"version": 1, "since": {"a": "yesterday"}}']
)
def test_broken_state_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError, match="delete the state branch"):
        decode(text, "asg-reconciler/c/state:state.json")
