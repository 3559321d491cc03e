"""Issue 24 item 8 through the CLI: a world-writable facts cache claiming m5.large has 64 vCPU does not
make `plan` scale a group from zero for a pod no m5.large can run; `plan` says why, once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.aws import instance_types
from reconciler.aws.cache import cache_root
from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.plan_cli import TAGS, config, group, pending, plan_json, snapshot


def test_a_planted_cache_does_not_scale_a_group_from_zero(
    aws: MotoAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.launch_template("lt", "m5.large")
    aws.asg("general", max_size=10, tags=TAGS, launch_template="lt")
    cfg = config(tmp_path)
    snap = snapshot(tmp_path, [pending("big", requests={"cpu": "16", "memory": "8Gi"})])
    assert group(plan_json(capsys, cfg, snap), "general")["action"] == "none"  # no m5.large fits it
    (path,) = cache_root().glob("*.json")
    plant(path)
    path.chmod(0o666)  # anyone on the host could have written this
    instance_types.clear_cache()  # each command is a fresh process
    planned = run(
        capsys, "plan", "--dry-run", "--config", str(cfg), "--snapshot", str(snap), "--output", "json"
    )
    assert planned.code == 0, planned.err
    assert group(json.loads(planned.out), "general")["action"] == "none"
    assert planned.err.count(str(path)) == 1 and "rm -rf" in planned.err  # said once, with the fix

    assert path.stat().st_mode & 0o777 == 0o600  # AWS's answer written over it, privately
    plant(path)  # the same lie in a file only we could have written: believed (the cache is read)
    instance_types.clear_cache()
    assert group(plan_json(capsys, cfg, snap), "general")["action"] == "scale-up"


def plant(path: Path) -> None:
    document = json.loads(path.read_text())
    document["instanceTypes"]["m5.large"].update(vcpus=64, memory_mib=262_144)
    path.write_text(json.dumps(document))
