"""scaleDown.windows in the config file: loaded as Windows, every mistake one line naming the file,
the line, the key and the fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.config.settings import Config, load_config
from reconciler.domain.errors import UserError
from reconciler.domain.windows import Window

WINDOWS = """\
cluster: c
scaleDown:
  windows:
    - schedule: "0 9 * * 1-5"
      duration: 8h
      maxNodes: 5
      timeZone: Europe/Berlin
    - schedule: "@daily"
      duration: 30m
"""


def load_text(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(text)
    return load_config(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as info:
        load_text(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_no_windows_by_default(tmp_path: Path) -> None:
    assert load_text(tmp_path, "cluster: c\n").scale_down.windows == ()


def test_windows_load_with_their_defaults(tmp_path: Path) -> None:
    assert load_text(tmp_path, WINDOWS).scale_down.windows == (
        Window("0 9 * * 1-5", timedelta(hours=8), 5, "Europe/Berlin"),
        Window("@daily", timedelta(minutes=30), None, "UTC"),
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('"0 9 * * 1-5"', '"0 25 * * 1-5"'),
            "asg-reconciler.yaml:4: scaleDown.windows.0.schedule: hour '25': 25 is out of range 0-23 "
            '(use minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5" for 09:00 on weekdays)',
        ),
        (
            ('"0 9 * * 1-5"', '"0 9 * *"'),
            'asg-reconciler.yaml:4: scaleDown.windows.0.schedule: "0 9 * *" is not valid (use a 5-field cron',
        ),
        (
            ("Europe/Berlin", "Europe/Springfield"),
            "asg-reconciler.yaml:7: scaleDown.windows.0.timeZone: 'Europe/Springfield' is not an IANA time "
            "zone (e.g. UTC, Europe/Berlin)",
        ),
        (
            ("duration: 30m", "duration: 0s"),
            "asg-reconciler.yaml:9: scaleDown.windows.1.duration: 0s must be above 0 "
            "(how long each window stays open, e.g. 8h)",
        ),
        (
            ("duration: 8h", "duration: 8 hours"),
            'asg-reconciler.yaml:5: scaleDown.windows.0.duration: "8 hours" is not a duration (use 8h)',
        ),
        (
            ("maxNodes: 5", "maxNodes: -1"),
            "asg-reconciler.yaml:6: scaleDown.windows.0.maxNodes: -1 is out of range "
            "(use a value at least 0)",
        ),
        (
            ("maxNodes: 5", "maxnodes: 5"),
            "asg-reconciler.yaml:6: scaleDown.windows.0: unknown key 'maxnodes' (did you mean maxNodes?)",
        ),
        (
            ('    - schedule: "@daily"\n      duration: 30m\n', "    - duration: 30m\n"),
            "scaleDown.windows.1: 'schedule' is a required property (add it)",
        ),
    ],
)
def test_a_mistake_names_file_line_key_and_fix(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    old, new = change
    assert old in WINDOWS
    message = error_of(tmp_path, WINDOWS.replace(old, new))
    assert message.startswith(str(tmp_path)) and expected in message, message


def test_windows_that_are_all_blackouts_are_refused(tmp_path: Path) -> None:
    text = "cluster: c\nscaleDown:\n  windows:\n    - {schedule: '0 9 * * *', duration: 1h, maxNodes: 0}\n"
    message = error_of(tmp_path, text)
    assert "asg-reconciler.yaml:3: scaleDown.windows: every window has maxNodes 0" in message
    assert "scaleDown.enabled: false" in message
