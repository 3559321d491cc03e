"""`status`, once: observe the cluster and the groups, and compare them with the manifest on main.

The manifest is read only when `git.url` is set. Status is a diagnostic, so a manifest it cannot
read (remote unreachable, file broken) is a warning in the report, not a failed command; a broken
cluster read still fails as it does everywhere else.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from reconciler.config import Config
from reconciler.errors import ReconcilerError
from reconciler.runtime.plan_stage import committed_on_main
from reconciler.status import StatusReport, build_status
from reconciler.world import observe


def status_once(config: Config, snapshot: Path | None, now: datetime) -> StatusReport:
    committed, label, error, applied = None, None, None, None
    if config.git.url:
        try:
            committed, label, applied = committed_on_main(config)
        except ReconcilerError as exc:
            error = str(exc)
    inventory = observe(config, snapshot, now)
    return build_status(config.cluster, inventory, committed, label, error, last_applied=applied)
