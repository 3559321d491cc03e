"""`make bench`: run every benchmark in its own process and print their one-line results.

Each benchmark prints its figures and exits non-zero when it misses its target, so a regression
shows as a failed `make bench`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
ORDER = ["listing.py", "planner.py", "history.py"]


def main() -> int:
    scripts = [HERE / name for name in ORDER if (HERE / name).exists()]
    scripts += sorted(p for p in HERE.glob("*.py") if p.name not in ORDER and p.name not in ("run_all.py",))
    scripts = [p for p in scripts if not p.name.startswith("_")]
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, check=False)
        print(f"   ({time.monotonic() - started:.1f}s wall)", flush=True)
        if result.returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"missed targets: {', '.join(failed)}")
        return 1
    print("all benchmarks met their targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
