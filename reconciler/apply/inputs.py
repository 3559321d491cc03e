"""Everything one apply run decides from, read before anything changes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.apply.changes import Introduced
from reconciler.config.settings import Config
from reconciler.domain.inventory import Inventory
from reconciler.gitops.manifest import Manifest


@dataclass(frozen=True)
class ApplyInputs:
    config: Config
    inventory: Inventory
    manifest: Manifest
    commit: str  # the commit of main being applied
    introduced: Mapping[tuple[str, str], Introduced]  # (group, instance) -> commit that approved it
    commit_time: Callable[[str], datetime]
    now: datetime
    dry_run: bool = False
    last_desired: Mapping[str, int] = field(default_factory=dict)  # group -> as the last apply left it
    # (group, instance) an earlier run recorded the intent to terminate, with no result recorded
    open_intents: tuple[tuple[str, str], ...] = ()
    # group -> a desired set outside the tool that an earlier run adopted (apply.drift adopt), while
    # main has not changed the group since that run's commit
    held: Mapping[str, int] = field(default_factory=dict)
    # group -> why the kill switch suspends it (the control ConfigMap): refused, nothing changes
    suspended: Mapping[str, str] = field(default_factory=dict)
    # what the kill switch's ConfigMap says that a person should correct (typos, unknown keys)
    notices: tuple[str, ...] = ()
    # why apply's own records cannot be trusted now (DESIGN §3 rule 4): removals are refused
    records_problems: tuple[str, ...] = ()
