"""Shared fixtures live in one plugin module per outside system."""

import logging

import pytest
from hypothesis import settings

# Speed is measured by benchmarks, never by a test's clock: Hypothesis's 200 ms deadline per example
# made property tests fail on a loaded 2-core CI machine (a 292 ms example), so it is off.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

pytest_plugins = [
    "tests.support.aws",
    "tests.support.kube",
    "tests.support.git",
    "tests.support.failing_launches",
]

# moto's server logs every request, and a traceback for each action it has not implemented (which
# our code handles, e.g. DescribeInstanceRefreshes): once a CLI run in this process has installed
# its log handler, that would fill the test output. Our own loggers are untouched.
logging.getLogger("werkzeug").disabled = True


@pytest.fixture(autouse=True)
def _own_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own $XDG_CACHE_HOME (clones, the AWS facts cache): nothing leaks between tests
    or into the user's ~/.cache. Child processes inherit it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache-home")))


# ------------------------------------------------------------------------------ the real tier's count
# `make test` says how many tests ran against the real control plane (tests/realcluster/), and why
# they skipped when they did; with xdist the reports reach the controller, which prints this.
_REAL_TIER = "tests/realcluster/"
_real_tier: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith(_REAL_TIER):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        _real_tier[outcome].append(reason)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = len(_real_tier["passed"]) + len(_real_tier["failed"])
    skipped = _real_tier["skipped"]
    if not ran and not skipped:
        return
    line = f"real-cluster tier: {ran} test(s) ran against the real control plane"
    line += f" ({len(_real_tier['passed'])} passed, {len(_real_tier['failed'])} failed)"
    if skipped:
        line += f", {len(skipped)} skipped: {sorted(set(skipped))[0]}"
    terminalreporter.write_line(line)
