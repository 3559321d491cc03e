"""`make demo` runs `asg-reconciler demo`: it must work from the installed entry point."""

import subprocess
import sys


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "demo-general" in out
    assert "~ demo-general  2 -> 1" in out  # the idle node proposed by name
    assert "cancel approved removal of" in out  # jobs arrive: the approved removal is given back
    assert "ml/train-0 -> demo-gpu" in out  # scale from zero on the GPU group's tags
    assert "Demo Reviewer" in out  # history shows who merged the proposal
    assert "Traceback" not in result.stderr
