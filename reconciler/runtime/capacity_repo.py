"""The clone of the capacity repository a stage works in: one per cluster and remote, fetched.

Its own small module so that what needs only Git (`history --report`) does not import the AWS and
Kubernetes clients `plan_stage` brings; `plan_stage` re-exports both names.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.gitops.repo import WorkingCopy


def default_work_dir(config: Config) -> Path:
    """A cache directory per cluster and remote, so two configs never share a clone."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(config.git.url.encode()).hexdigest()[:10]
    return base / "asg-reconciler" / f"{config.cluster}-{digest}"


def working_copy(config: Config, *, fetch: bool = True) -> WorkingCopy:
    """The clone of the capacity repo, fetched (`fetch=False`: as last fetched, for a second look
    right after one that did)."""
    if not config.git.url:
        raise UserError(
            f"{config.source or 'config'}: git.url: not set (point it at the capacity repository)"
        )
    copy = WorkingCopy.from_config(config.git, default_work_dir(config))
    if fetch:
        copy.sync()
    return copy
