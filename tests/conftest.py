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
