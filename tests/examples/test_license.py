"""The licence pyproject.toml declares ships as its full text, and in the wheel's metadata."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt (also Debian's common-licenses/Apache-2.0).
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_file_is_the_canonical_apache_2_0_text() -> None:
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256, "LICENSE is not Apache-2.0's unchanged text"


def test_pyproject_declares_the_same_license_and_ships_the_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]  # PEP 639: copied into the wheel's .dist-info


def test_the_readme_names_the_license() -> None:
    assert "[Apache License 2.0](LICENSE)" in (ROOT / "README.md").read_text()
