"""`suspend` and `resume`, once: pull or release the kill switch (the control ConfigMap).

Who pulled it is the caller's own name (their git `user.email`, else the login name and host), kept
beside the reason so `apply` and `status` can say who stopped apply, when and why.
"""

from __future__ import annotations

import getpass
import socket
import subprocess

from reconciler.aws.clients import aws_clients, aws_errors
from reconciler.aws.discovery import discover_asgs
from reconciler.config.settings import Config
from reconciler.domain.errors import ReconcilerError, UserError
from reconciler.kube.client import api_client
from reconciler.kube.control import Control, ControlMap, switch_namespace


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


def _known_groups(config: Config) -> tuple[list[str] | None, str]:
    """The cluster's node groups as discovery finds them, or None and why it could not ask AWS."""
    try:
        autoscaling, _ = aws_clients(config)
        with aws_errors("describing node groups"):
            found = discover_asgs(config.node_groups, autoscaling, config.source)
        return [f.asg["AutoScalingGroupName"] for f in found], ""
    except ReconcilerError as exc:
        return None, str(exc)


def _check_group(config: Config, group: str) -> str:
    """A group name that is none of the cluster's is refused before anything is written: a typo
    would suspend nothing while the person believes the group stopped. When AWS cannot be asked,
    the switch is pulled anyway (it must work while AWS is down) and a warning says so."""
    known, why = _known_groups(config)
    if known is None:
        return f"; warning: the name could not be checked against AWS ({why})"
    if any(name.casefold() == group.casefold() for name in known):
        return ""
    shown = ", ".join(sorted(known)[:10]) + (", ..." if len(known) > 10 else "")
    raise UserError(
        f"--node-group {group}: no node group of {config.cluster} has that name (found: {shown or 'none'}); "
        "nothing was suspended. Check the name, or add --force to suspend a group discovery does not find yet"
    )


def switch_once(config: Config, *, suspend: bool, group: str | None, reason: str, force: bool = False) -> str:
    warning = _check_group(config, group) if suspend and group is not None and not force else ""
    api = api_client(config.kubernetes)
    namespace, found = switch_namespace(config, api)
    warning += found
    switch = ControlMap(api, namespace)
    what = f"node group {group} of {config.cluster}" if group else f"apply for {config.cluster}"
    if suspend:
        key = switch.suspend(group, reason, _caller())
        lift = f"asg-reconciler resume --node-group {group}" if group else "asg-reconciler resume"
        return (
            f"suspended {what} ({switch.where}, key {key}): apply changes nothing there until "
            f"resumed ({lift}){warning}"
        )
    removed = switch.resume(group)
    still = switch.read()
    left = _still_suspended(still, config, group)
    keys = f", removed {', '.join(removed)}" if removed else ", it was not suspended there"
    return f"resumed {what} ({switch.where}{keys}){left}{found}"


def _still_suspended(control: Control, config: Config, group: str | None) -> str:
    notes = []
    if control.cluster is not None and group is not None:
        notes.append("the whole cluster is still suspended (asg-reconciler resume, without --node-group)")
    if config.apply.suspend:
        notes.append("apply.suspend is still true in the config")
    return "; " + "; ".join(notes) if notes else ""
