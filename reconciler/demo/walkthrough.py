"""`asg-reconciler demo`: the bundled example cluster against an in-process AWS mock.

Nothing here is special-cased: the demo writes a kubectl-style snapshot and a config file and runs
the same code paths as the CLI commands it narrates.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from reconciler.config import load_config
from reconciler.demo.mock_aws import create_groups, mock_aws
from reconciler.status import build_status, render_status_table
from reconciler.world import observe

Echo = Callable[[str], None]
_PLACEHOLDER = re.compile(r"\{\{(instance|zone):([\w-]+):(\d+)\}\}")


def _snapshot_text(instances: dict[str, list[tuple[str, str]]]) -> str:
    template = resources.files("reconciler.demo").joinpath("cluster.yaml").read_text()

    def fill(match: re.Match[str]) -> str:
        instance_id, zone = instances[match[2]][int(match[3])]
        return instance_id if match[1] == "instance" else zone

    return _PLACEHOLDER.sub(fill, template)


def run_demo(echo: Echo) -> None:
    with tempfile.TemporaryDirectory(prefix="asg-reconciler-demo-") as tmp, mock_aws() as endpoint:
        workdir = Path(tmp)
        echo(f"# asg-reconciler demo: AWS is an in-process moto server at {endpoint}")
        instances = create_groups()
        for name, launched in sorted(instances.items()):
            ids = ", ".join(instance for instance, _ in launched)
            echo(f"#   ASG {name}: {len(launched)} instance(s) {ids}".rstrip())
        snapshot = workdir / "cluster.yaml"
        snapshot.write_text(_snapshot_text(instances))
        config_file = workdir / "asg-reconciler.yaml"
        config_file.write_text(resources.files("reconciler.demo").joinpath("asg-reconciler.yaml").read_text())
        echo("# the cluster is the bundled example (reconciler/demo/cluster.yaml), read as a kubectl dump")
        echo("")
        echo(f"$ asg-reconciler status --config {config_file.name} --snapshot {snapshot.name}")
        config = load_config(config_file)
        report = build_status(config.cluster, observe(config, snapshot, datetime.now(UTC)))
        echo(render_status_table(report).rstrip("\n"))
        echo("")
        echo(
            "# This demo shows the read side (status). The plan -> review -> apply story joins it as "
            "the planner, GitOps and apply stages land."
        )
