"""The group names the planner keeps are exactly those the manifest schema accepts."""

from __future__ import annotations

import json
from importlib import resources

from reconciler.domain.model import GROUP_NAME


def test_the_domain_group_name_is_the_manifest_schemas() -> None:
    schema = json.loads(resources.files("reconciler.schemas").joinpath("manifest.schema.json").read_text())
    assert GROUP_NAME.pattern == schema["$defs"]["groupName"]["pattern"]
