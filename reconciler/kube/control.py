"""The kill switch: the ConfigMap `asg-reconciler-control` (DESIGN §5.1 `suspend|resume`).

A person stops every AWS and drain write of apply at once, without a Git commit (which might be the
very thing that is broken) and without apply's credentials: `kubectl` or `asg-reconciler suspend`
writes the ConfigMap, apply reads it after taking its Lease and before every change. Keys:

  suspend: "true"              the whole cluster            reason, by, at: who and why
  suspend.<group>: "true"      one node group               reason.<group>, by.<group>, at.<group>

Anything but "true" (case-insensitive) is not suspended. The plan stage keeps planning: it writes
only Git, and a plan made while suspended is applied once resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.config import Config
from reconciler.errors import RefusedError
from reconciler.kube.client import run_namespace
from reconciler.kube.live import api_error, unreachable
from reconciler.kube.retry import with_retries

CONTROL_CONFIGMAP = "asg-reconciler-control"
_MERGE_PATCH = "application/merge-patch+json"


class SuspendedError(RefusedError):
    """The kill switch is on: nothing may be written, not even a taint given back."""


@dataclass(frozen=True)
class Suspension:
    reason: str = ""
    by: str = ""
    at: str = ""

    def describe(self, what: str) -> str:
        who = f" by {self.by}" if self.by else ""
        when = f" at {self.at}" if self.at else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{what} suspended{who}{when}{why} (asg-reconciler resume to lift it)"


@dataclass(frozen=True)
class Control:
    """What the switch says now: the whole cluster, and each suspended group."""

    cluster: Suspension | None = None
    groups: Mapping[str, Suspension] = field(default_factory=dict)
    source: str = ""  # where it was read from, for messages

    def group(self, name: str) -> Suspension | None:
        return self.cluster or self.groups.get(name)

    def refuse_if_suspended(self, group: str | None = None) -> None:
        """SuspendedError when the whole cluster, or `group`, is suspended (apply's guard, before
        every change)."""
        if self.cluster is not None:
            raise SuspendedError(self.cluster.describe(f"apply is ({self.source})"))
        why = self.groups.get(group) if group is not None else None
        if why is not None:
            raise SuspendedError(why.describe(f"{group} is"))

    def lines(self) -> list[str]:
        """What is suspended, one line each (for `status`)."""
        found = [self.cluster.describe("apply is")] if self.cluster else []
        return found + [why.describe(f"node group {name} is") for name, why in sorted(self.groups.items())]


def control_from_data(data: Mapping[str, str], source: str) -> Control:
    """The switch in a ConfigMap's data. Pure."""

    def on(key: str) -> bool:
        return str(data.get(key, "")).strip().lower() == "true"

    def suspension(suffix: str) -> Suspension:
        return Suspension(
            data.get(f"reason{suffix}", ""), data.get(f"by{suffix}", ""), data.get(f"at{suffix}", "")
        )

    cluster = suspension("") if on("suspend") else None
    groups = {
        key.removeprefix("suspend."): suspension(key.removeprefix("suspend"))
        for key in data
        if key.startswith("suspend.") and on(key)
    }
    return Control(cluster, groups, source)


class ControlMap:
    """Reads and writes the switch in one namespace."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.namespace = namespace

    @property
    def where(self) -> str:
        return f"configmap {self.namespace}/{CONTROL_CONFIGMAP}"

    def read(self) -> Control:
        """The switch now; no ConfigMap, or one we may not read, is "not suspended" only when it is
        absent: a 403 is an error (a kill switch that cannot be read must not be taken as off)."""
        try:
            response: Any = with_retries(
                lambda: self.core.read_namespaced_config_map(
                    CONTROL_CONFIGMAP, self.namespace, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return Control(source=self.where)
            raise api_error(f"read {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None
        data = orjson.loads(response.data).get("data") or {}
        return control_from_data({str(k): str(v) for k, v in data.items()}, self.where)

    def suspend(self, group: str | None, reason: str, by: str, now: datetime | None = None) -> None:
        suffix = f".{group}" if group else ""
        at = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._write(
            {f"suspend{suffix}": "true", f"reason{suffix}": reason, f"by{suffix}": by, f"at{suffix}": at}
        )

    def resume(self, group: str | None) -> None:
        suffix = f".{group}" if group else ""
        self._write({f"{key}{suffix}": None for key in ("suspend", "reason", "by", "at")})

    def _write(self, data: dict[str, str | None]) -> None:
        try:
            try:
                with_retries(
                    lambda: self.core.patch_namespaced_config_map(
                        CONTROL_CONFIGMAP,
                        self.namespace,
                        {"data": data},
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = k8s.V1ConfigMap(
                    metadata=k8s.V1ObjectMeta(name=CONTROL_CONFIGMAP, namespace=self.namespace),
                    data={k: v for k, v in data.items() if v is not None},
                )
                with_retries(
                    lambda: self.core.create_namespaced_config_map(
                        self.namespace, body, _preload_content=False
                    )
                )
        except ApiException as exc:
            raise api_error(f"write {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(self.api, exc) from None


class Switch:
    """The kill switch as apply finds it now: `apply.suspend` in its config and the ConfigMap."""

    def __init__(self, config: Config, api: k8s.ApiClient) -> None:
        self.config = config
        self.map = ControlMap(api, run_namespace(config))

    def read(self) -> Control:
        own = suspended_by_config(self.config.apply.suspend, self.config.source or "the config")
        return merged(own, self.map.read())


def suspended_by_config(flag: bool, source: str) -> Control:
    """`apply.suspend: true` in apply's config: the whole cluster, until the config says otherwise."""
    if not flag:
        return Control(source=source)
    return Control(Suspension(reason="apply.suspend is true in the config"), {}, source)


def merged(first: Control, second: Control) -> Control:
    """Both switches at once: the config's and the ConfigMap's."""
    return Control(
        first.cluster or second.cluster,
        {**second.groups, **first.groups},
        first.source if first.cluster else second.source,
    )
