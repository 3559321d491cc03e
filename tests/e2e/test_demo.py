"""`make demo` runs `asg-reconciler demo`: it must work from the installed entry point."""

import subprocess
import sys


def test_demo_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "demo-general" in result.stdout
    assert "pending (unschedulable) pods: 4" in result.stdout
    assert "Traceback" not in result.stderr
