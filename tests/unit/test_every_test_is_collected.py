"""A `test_` function in a file pytest does not collect never runs and never fails: six end-to-end
tests once sat in tests/support/apply_world.py, silently. Every test must live in a collected file."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _pytest_settings() -> dict[str, object]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    settings: dict[str, object] = pyproject.get("tool", {}).get("pytest", {}).get("ini_options", {})
    return settings


def _patterns(settings: dict[str, object], key: str, default: list[str]) -> list[str]:
    value = settings.get(key, default)
    return value.split() if isinstance(value, str) else [str(v) for v in value]  # type: ignore[attr-defined]


def _looks_like_tests(tree: ast.Module, functions: list[str], classes: list[str]) -> list[str]:
    """Names pytest would collect as tests, were the file collected: module-level test functions and
    test classes (pytest's prefixes or globs, `python_functions` and `python_classes`)."""

    def matches(name: str, patterns: list[str]) -> bool:
        return any(fnmatch.fnmatch(name, p) if "*" in p else name.startswith(p) for p in patterns)

    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and matches(node.name, functions):
            found.append(f"{node.name} (line {node.lineno})")
        if isinstance(node, ast.ClassDef) and matches(node.name, classes):
            methods = [
                m.name
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and matches(m.name, functions)
            ]
            if methods:
                found.append(f"{node.name} (line {node.lineno})")
    return found


def test_no_test_function_lives_outside_the_files_pytest_collects() -> None:
    settings = _pytest_settings()
    files = _patterns(settings, "python_files", ["test_*.py", "*_test.py"])
    functions = _patterns(settings, "python_functions", ["test"])
    classes = _patterns(settings, "python_classes", ["Test"])
    testpaths = [ROOT / p for p in _patterns(settings, "testpaths", ["tests"])]
    stray = []
    for path in sorted(TESTS.rglob("*.py")):
        collected = any(fnmatch.fnmatch(path.name, p) for p in files) and any(
            path.is_relative_to(base) for base in testpaths
        )
        if collected:
            continue
        for name in _looks_like_tests(ast.parse(path.read_text(), str(path)), functions, classes):
            stray.append(f"{path.relative_to(ROOT)}: {name}")
    assert not stray, "tests pytest never collects (move them into a tests/**/test_*.py file): " + "; ".join(
        stray
    )


def test_the_check_sees_a_test_function_in_a_support_module() -> None:
    """The check itself is not blind: the shape of the old apply_world.py is caught."""
    tree = ast.parse(
        "def helper():\n    pass\n\n"
        "def test_signed_approval_drains_and_terminates_exactly_the_named_instance(world):\n"
        "    assert world\n\n"
        "class TestGates:\n    def test_refused(self):\n        pass\n"
    )
    assert _looks_like_tests(tree, ["test"], ["Test"]) == [
        "test_signed_approval_drains_and_terminates_exactly_the_named_instance (line 4)",
        "TestGates (line 7)",
    ]
