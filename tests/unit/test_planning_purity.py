"""planning/ is pure (DESIGN §4): importing it must not pull in an edge or its library."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = (
    "boto3",
    "botocore",
    "kubernetes",
    "git",
    "reconciler.kube",
    "reconciler.aws",
    "reconciler.gitops",
    "reconciler.apply",
)

SCRIPT = """
import pkgutil, importlib, sys
import reconciler.planning as planning
for info in pkgutil.walk_packages(planning.__path__, "reconciler.planning."):
    importlib.import_module(info.name)
print("\\n".join(sorted(sys.modules)))
"""


def test_planning_imports_no_edge() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True, text=True).stdout
    loaded = out.split()
    bad = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
