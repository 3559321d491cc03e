"""Shared fixtures live in one plugin module per outside system."""

import logging

pytest_plugins = [
    "tests.fixtures_aws",
    "tests.fixtures_kube",
    "tests.fixtures_git",
]

# moto's server logs every request, and a traceback for each action it has not implemented (which
# our code handles, e.g. DescribeInstanceRefreshes): once a CLI run in this process has installed
# its log handler, that would fill the test output. Our own loggers are untouched.
logging.getLogger("werkzeug").disabled = True
