"""`suspend` and `resume`, once: pull or release the kill switch (the control ConfigMap).

Who pulled it is the caller's own name (their git `user.email`, else the login name and host), kept
beside the reason so `apply` and `status` can say who stopped apply, when and why.
"""

from __future__ import annotations

import getpass
import socket
import subprocess

from reconciler.config.settings import Config
from reconciler.kube.client import api_client, run_namespace
from reconciler.kube.control import Control, ControlMap


def _caller() -> str:
    try:
        email = subprocess.run(
            ["git", "config", "user.email"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        email = ""
    if email:
        return email
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        return socket.gethostname()


def switch_once(config: Config, *, suspend: bool, group: str | None, reason: str) -> str:
    switch = ControlMap(api_client(config.kubernetes), run_namespace(config))
    what = f"node group {group} of {config.cluster}" if group else f"apply for {config.cluster}"
    if suspend:
        key = switch.suspend(group, reason, _caller())
        return f"suspended {what} ({switch.where}, key {key}): apply changes nothing there until resumed"
    removed = switch.resume(group)
    still = switch.read()
    left = _still_suspended(still, config, group)
    keys = f", removed {', '.join(removed)}" if removed else ", it was not suspended there"
    return f"resumed {what} ({switch.where}{keys}){left}"


def _still_suspended(control: Control, config: Config, group: str | None) -> str:
    notes = []
    if control.cluster is not None and group is not None:
        notes.append("the whole cluster is still suspended (asg-reconciler resume, without --node-group)")
    if config.apply.suspend:
        notes.append("apply.suspend is still true in the config")
    return "; " + "; ".join(notes) if notes else ""
