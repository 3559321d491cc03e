"""`validate` is linear in the manifest's size and bounded by the 1 MiB cap; an oversized file is
refused at once (issue 28: 148 s for a 7.7 MB manifest, 142 s to refuse an 89 MB config).

Targets: time per byte at the cap within 1.5x of that at 1/8 of it (linear); the cap's manifest
validated within 40 s (the pure-Python round-trip parser reads roughly 60 KB a second); an 89 MB
file refused within 0.5 s. Prints one summary line; exits 1 when a target is missed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.config.documents import MAX_DOCUMENT_BYTES
from reconciler.gitops.validate import validate_files

LINEAR_RATIO = 1.5
TARGET_AT_CAP = 40.0
TARGET_REFUSAL = 0.5


def manifest(size: int) -> str:
    """A valid manifest of about `size` bytes: groups with one listed removal each."""
    lines = ["version: 1", "cluster: prod", "nodeGroups:"]
    total, i = 0, 0
    while total < size:
        group = [
            f"  group-{i:06d}:",
            "    removeInstances:",
            f"      - i-{i:017x}  # ip-10-0-{i % 250}-{i % 200}.ec2.internal",
            "    desired: 3",
            "    minSize: 0",
            "    maxSize: 10",
        ]
        total += sum(len(line) + 1 for line in group)
        lines += group
        i += 1
    return "\n".join(lines) + "\n"


def timed(path: Path) -> float:
    began = time.perf_counter()
    report = validate_files([path], previous=lambda _: None)
    took = time.perf_counter() - began
    if report.errors and "1 MiB" not in str(report.errors[0]):
        raise SystemExit(f"unexpected problem: {report.errors[0]}")
    return took


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        small, large, huge = (
            Path(scratch, "small.yaml"),
            Path(scratch, "large.yaml"),
            Path(scratch, "huge.yaml"),
        )
        small.write_text(manifest(MAX_DOCUMENT_BYTES // 8))
        large.write_text(manifest(MAX_DOCUMENT_BYTES - 4096))
        with huge.open("w") as file:
            file.write("cluster: prod\n" + ("# " + "x" * 98 + "\n") * 890_000)
        small_s, large_s, huge_s = timed(small), timed(large), timed(huge)
        small_b, large_b = small.stat().st_size, large.stat().st_size
    ratio = (large_s / large_b) / (small_s / small_b)
    print(
        f"validate: {small_b:,} B in {small_s:.2f}s, {large_b:,} B in {large_s:.2f}s "
        f"(per-byte ratio {ratio:.2f}, target <= {LINEAR_RATIO}; at the cap target <= {TARGET_AT_CAP:g}s); "
        f"an 89 MB file refused in {huge_s:.3f}s (target <= {TARGET_REFUSAL}s)"
    )
    return 0 if ratio <= LINEAR_RATIO and large_s <= TARGET_AT_CAP and huge_s <= TARGET_REFUSAL else 1


if __name__ == "__main__":
    sys.exit(main())
