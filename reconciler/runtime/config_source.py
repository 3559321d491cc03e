"""The config file as `run` reads it: again at every cycle, most keys taking effect at the next one;
the keys read once at start wait for a restart (said once), and a file that no longer loads keeps the
last good config until it is fixed.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from reconciler.config.settings import Config, load_config
from reconciler.domain.errors import ReconcilerError
from reconciler.telemetry.metrics import Metrics

_log = logging.getLogger("reconciler.run")


@dataclass(frozen=True)
class _RestartOnly:
    """Keys read once at start: a change in the file is reported and waits for a restart."""

    cluster: str
    run: object
    kubernetes: object

    @staticmethod
    def of(config: Config) -> _RestartOnly:
        return _RestartOnly(config.cluster, config.run, config.kubernetes)


class ConfigSource:
    """The config file, read again at every cycle: most keys take effect at the next cycle; a file
    that changes the cluster, `run.*` or `kubernetes.*` waits whole for a restart (logged once). A
    file that no longer loads keeps the last good config and is reported until it is fixed."""

    def __init__(self, path: Path, config: Config, metrics: Metrics) -> None:
        self.path = path
        self.current = config
        self._fixed = _RestartOnly.of(config)
        self._metrics = metrics
        self._said = ""
        self._lock = threading.Lock()

    def read(self, stage: str) -> Config:
        with self._lock:
            try:
                fresh = load_config(self.path)
            except ReconcilerError as exc:
                self._metrics.error(stage, "config")
                self._say(f"config: {exc}; going on with the last good config until it is fixed", True)
                return self.current
            if _RestartOnly.of(fresh) != self._fixed:
                # Not half of it: a new cluster name with the old one's pods and new node groups
                # would plan one cluster's pods onto another's ASGs. The whole file waits.
                self._metrics.error(stage, "config")
                self._say(
                    f"config: {self.path}: cluster, run.* or kubernetes.* changed: the whole file takes "
                    "effect after a restart; going on with the config read before",
                    True,
                )
                return self.current
            if self._said:
                self._say("", False)
            self.current = fresh
            return fresh

    def _say(self, text: str, warn: bool) -> None:
        if text != self._said and warn:
            _log.warning("%s", text)
        self._said = text
