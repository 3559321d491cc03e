"""Run the CLI in-process as a user would, capturing exit code, stdout and stderr."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconciler.cli.commands import main


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    code = info.value.code
    return Result(code if isinstance(code, int) else 1, captured.out, captured.err)
