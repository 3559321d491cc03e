"""Shared fixtures live in one plugin module per outside system."""

pytest_plugins = [
    "tests.fixtures_aws",
    "tests.fixtures_kube",
    "tests.fixtures_git",
]
