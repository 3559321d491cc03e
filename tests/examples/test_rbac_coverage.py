"""RBAC coverage, measured: the Kubernetes calls each stage makes, against the Roles each overlay grants it.

The stages run end to end against the fake API server (reconciler/demo/kube_api/), which records every
request: `plan` (it writes a scale-down proposal), `apply` (nothing approved yet), a person's `approve`
(not a stage: not counted), `apply` again (drains and terminates the approved instance). What only the
`run` loop does (the plan stage's watch-fed cache, leader election, Events, the status ConfigMap) is
driven here with the very classes `run` uses, against the same server. Each request is mapped to
what the API server's RBAC authorizer checks (verb, API group, resource[/subresource], namespace,
name), and the test fails

- when a call is not granted by the Roles and ClusterRoles bound to the stage's ServiceAccount in the
  rendered overlay (it would be a 403 in a real cluster), and
- when a rule grants a verb on a resource (in a namespace, for a name) that no call of the stage used.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.config.settings import KubernetesConfig, load_config
from reconciler.demo.kube_api import FakeKubeAPI, RecordedRequest
from reconciler.domain.event import NODE, NORMAL, POD, EventSpec
from reconciler.domain.lease_names import leader_lease_name
from reconciler.kube.cache import KINDS as CACHE_KINDS
from reconciler.kube.cache import ClusterCache
from reconciler.kube.client import api_client
from reconciler.kube.events import EventRecorder
from reconciler.kube.leader import LeaderElector
from reconciler.kube.status_configmap import PUSHED_KEY, STATUS_CONFIGMAP, StatusConfigMap
from reconciler.kube.wake_hint import KeyWatch
from reconciler.telemetry.events import SCALE_DOWN, SCALE_DOWN_PROPOSED, TRIGGERED_SCALE_UP
from tests.examples.kustomize import find, needs_kubectl, overlay
from tests.support.apply_world import PROPOSAL, World
from tests.support.aws import MotoAws
from tests.support.git import needs_ssh_keygen

pytestmark = [needs_kubectl, needs_ssh_keygen]

NAMESPACE = "asg-reconciler"  # the overlays' namespace, and run.namespace in their configs


@dataclass(frozen=True, order=True)
class Call:
    """One request as RBAC sees it. `name` is empty for lists, watches and creates of a collection
    (RBAC cannot match those against resourceNames)."""

    verb: str
    group: str
    resource: str  # "pods", or "pods/eviction" for a subresource
    namespace: str  # "" for cluster-scoped objects and calls across all namespaces
    name: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"


def rbac_call(request: RecordedRequest) -> Call:
    """The API server's request attributes for one request (k8s.io/apiserver RequestInfoFactory)."""
    parts = [p for p in request.path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        assert parts[0] == "apis", request.path
        group, rest = parts[1], parts[3:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    method = request.method.upper()
    if method == "GET":
        verb = ("watch" if request.query.get("watch") in ("true", "1") else "list") if not name else "get"
        if not name:  # a list or watch with an exact metadata.name selector is authorised by that name
            exact = [
                part.split("=", 1)[1].lstrip("=")
                for part in str(request.query.get("fieldSelector", "")).split(",")
                if part.startswith(("metadata.name=", "metadata.name=="))
            ]
            name = exact[0] if len(exact) == 1 else ""
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update"}.get(method) or (
            "delete" if name else "deletecollection"
        )
    return Call(verb, group, f"{resource}/{sub}" if sub else resource, namespace, name)


@dataclass(frozen=True)
class Grant:
    """One (verb, resource) of one rule, where the binding puts it."""

    role: str
    verb: str
    group: str
    resource: str
    namespace: str | None  # None: a ClusterRole through a ClusterRoleBinding (everywhere)
    names: frozenset[str]  # empty: any name

    def allows(self, call: Call) -> bool:
        return (
            (self.verb, self.group, self.resource) == (call.verb, call.group, call.resource)
            and (self.namespace is None or self.namespace == call.namespace)
            and (not self.names or call.name in self.names)
        )

    def __str__(self) -> str:
        names = f" {sorted(self.names)}" if self.names else ""
        where = f" in {self.namespace}" if self.namespace is not None else " (cluster-wide)"
        return f"{self.role}: {self.verb} {self.group or 'core'}/{self.resource}{names}{where}"


def grants(objects: list[dict[str, Any]], service_account: str, cluster: str, rendered: str) -> list[Grant]:
    """Every grant the rendered overlay binds to `service_account`. Lease names carry the cluster's
    name; the examples' cluster (`rendered`) is swapped for the test world's (`cluster`)."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    found: list[Grant] = []
    for binding in find(objects, "RoleBinding") + find(objects, "ClusterRoleBinding"):
        subjects = binding.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == service_account and s["namespace"] == NAMESPACE
            for s in subjects
        ):
            continue
        where = binding["metadata"].get("namespace")  # None for a ClusterRoleBinding
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else None, ref["name"])]
        assert ref["kind"] == "Role" or binding["kind"] == "ClusterRoleBinding", (
            "bind ClusterRoles cluster-wide"
        )
        for rule in role["rules"]:
            assert "*" not in str(rule), f"a wildcard in {ref['name']}"
            names = frozenset(n.replace(f"-{rendered}", f"-{cluster}") for n in rule.get("resourceNames", []))
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        found.append(
                            Grant(f"{ref['kind']} {ref['name']}", verb, group, resource, where, names)
                        )
    return found


def unused(grant: Grant, calls: Iterable[Call]) -> bool:
    """No call used this grant: its verb on its resource, in its namespace, for each of its names."""
    used = [c for c in calls if grant.allows(c)]
    if grant.names:
        return not grant.names <= {c.name for c in used}
    return not used


def problems(stage: str, calls: set[Call], granted: list[Grant]) -> list[str]:
    found = [
        f"{stage}: {c} is not granted (a 403)" for c in sorted(calls) if not any(g.allows(c) for g in granted)
    ]
    found += [f"{stage}: {g} is granted but no call used it" for g in granted if unused(g, calls)]
    return found


# ----------------------------------------------------------------------------- the measurement


@pytest.fixture
def world(
    aws: MotoAws, kube_api: FakeKubeAPI, bare_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> World:
    """tests/e2e's world (moto, the fake API, a bare repository, SSH keys), with run.namespace set
    as the overlays' configs set it."""
    made = World(aws, kube_api, bare_remote, tmp_path, monkeypatch)
    document = yaml.safe_load(made.config.read_text())
    document["run"] = {"namespace": NAMESPACE}
    made.config.write_text(yaml.safe_dump(document))
    cluster = str(document["cluster"])
    for shipped in shipped_objects(overlay("split"), cluster):  # deployed with the overlay, before any pod
        kube_api.put(shipped)
    return made


def shipped_objects(objects: list[dict[str, Any]], cluster: str) -> list[dict[str, Any]]:
    """What an overlay ships for the stages to patch: its ConfigMaps (not the generated config
    files) and leader Leases, these named for the test world's cluster."""
    (rendered,) = {
        yaml.safe_load(c["data"]["config.yaml"])["cluster"]
        for c in find(objects, "ConfigMap")
        if "config.yaml" in (c.get("data") or {})
    }
    leases = []
    for lease in find(objects, "Lease"):
        name = lease["metadata"]["name"].replace(f"-{rendered}", f"-{cluster}")
        leases.append({**lease, "metadata": {**lease["metadata"], "name": name}})
    configmaps = [c for c in find(objects, "ConfigMap") if "config.yaml" not in (c.get("data") or {})]
    return configmaps + leases


class Recorder:
    """The fake API's requests, per stage."""

    def __init__(self, api: FakeKubeAPI) -> None:
        self.api = api
        self.calls: dict[str, set[Call]] = {}

    def take(self, stage: str) -> None:
        """Everything recorded since the last take belongs to `stage` ("" drops it: a person's)."""
        requests, self.api.requests[:] = list(self.api.requests), []
        if stage:
            self.calls.setdefault(stage, set()).update(rbac_call(r) for r in requests)


def until(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_loop_pieces(world: World, recorder: Recorder, stage: str, events: list[EventSpec]) -> None:
    """What `run` adds around a stage's cycles (reconciler/runtime/run_loop.py), driven briefly."""
    config = load_config(world.config)
    settings = KubernetesConfig(kubeconfig=str(world.tmp / "kubeconfig"))
    api = api_client(settings)
    lease = leader_lease_name(stage, config.cluster)
    try:
        if stage == "plan":  # the watch-fed cache: every kind listed, then watched from there
            cache = ClusterCache(
                api,
                autoscaler_names=(config.kubernetes.autoscaler_lease, config.kubernetes.autoscaler_status),
                request_timeout=5,
                watch_timeout=1,
            )
            cache.start()
            try:
                assert cache.wait_synced(10)
                until(
                    lambda: (
                        sum(1 for r in list(world.kube.requests) if r.query.get("watch")) >= len(CACHE_KINDS)
                    ),
                    "a watch on every kind",
                )
            finally:
                cache.stop()
        # leader election on the shipped Lease: the leader takes and renews it; a standby reads it;
        # the leader releases it when stopped
        leader = LeaderElector(
            api, NAMESPACE, lease, "replica-a", lease_duration=3, renew_deadline=2, retry_period=0.2
        )
        standby = LeaderElector(
            api, NAMESPACE, lease, "replica-b", lease_duration=3, renew_deadline=2, retry_period=0.2
        )
        leader.start()
        assert leader.wait(10)
        standby.start()
        until(lambda: standby.observed, "the standby to see the leader")
        time.sleep(0.5)  # a few renewals
        standby.stop()
        leader.stop(release=True)
        # Events: the first write creates; a repeat patches the count; another replica's first
        # sighting of the same Event gets 409, reads it and patches
        now = datetime.now(UTC)
        EventRecorder(api, host="replica-a", min_interval=0).emit(events, now)
        repeat = EventRecorder(api, host="replica-b", min_interval=0)
        repeat.emit(events, now)
        repeat.emit(events, now)
        # the status ConfigMap (shipped by base/configmaps.yaml): patched when its content changes
        status = StatusConfigMap(api, NAMESPACE, key=f"status-{stage}")
        assert status.publish(f"{stage}: first\n", now)
        assert status.publish(f"{stage}: second\n", now)
        if stage == "plan":  # the split deployment's wake-up hint: the commit it pushed to main
            assert status.mark(PUSHED_KEY, "1" * 40, now)
        else:  # which the apply-stage process watches (a watch on that one ConfigMap)
            found = world.kube.get_object("ConfigMap", NAMESPACE, STATUS_CONFIGMAP) or {}
            world.kube.put({**found, "data": {**found["data"], PUSHED_KEY: "1" * 40}})  # not apply's call
            seen: list[str] = []
            hints = KeyWatch(api, NAMESPACE, STATUS_CONFIGMAP, PUSHED_KEY, seen.append, watch_timeout=1)
            hints.start()
            try:
                until(lambda: seen == ["1" * 40], "the hint seen")
            finally:
                hints.stop()
    finally:
        api.close()
    recorder.take(stage)


@pytest.fixture
def measured(
    world: World, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[World, dict[str, set[Call]]]]:
    recorder = Recorder(world.kube)
    recorder.take("")  # the world's own set-up

    planned = world.cli(capsys, "plan")  # writes: a scale-down proposal for node-b's instance
    assert planned.code == 0, planned.err
    recorder.take("plan")
    recorder.calls["plan-once"] = set(recorder.calls["plan"])  # the one-shot plan (the CronJob)

    before = world.cli(capsys, "apply")  # nothing approved yet: no change, a record
    assert before.code == 0, before.err
    recorder.take("apply")
    approved = world.cli(capsys, "approve", "scale-down")  # a person's command, not a stage's
    assert approved.code == 0, approved.err
    recorder.take("")
    applied = world.cli(capsys, "apply")  # drains node-b (an eviction) and terminates its instance
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 1 and world.kube.get_object("Pod", "shop", "web-b") is None
    recorder.take("apply")
    assert world.kube.get_object("Pod", "shop", "web-a") is not None
    assert PROPOSAL  # the proposal branch the approval merged

    pod = EventSpec(POD, "shop", "web-a", "uid-web-a", NORMAL, TRIGGERED_SCALE_UP, "pod triggered scale-up")
    proposed = EventSpec(NODE, "", "node-a", "uid-node-a", NORMAL, SCALE_DOWN_PROPOSED, "proposed")
    run_loop_pieces(world, recorder, "plan", [pod, proposed])
    scaled = EventSpec(NODE, "", "node-b", "uid-node-b", NORMAL, SCALE_DOWN, "drained node-b")
    run_loop_pieces(world, recorder, "apply", [scaled])
    yield world, recorder.calls


# What each overlay's ServiceAccounts run, and which measured stages that is.
ACCOUNTS: dict[str, dict[str, tuple[str, ...]]] = {
    "split": {"asg-reconciler-plan": ("plan",), "asg-reconciler-apply": ("apply",)},
    "shadow": {"asg-reconciler-plan": ("plan",)},
    "all-in-one": {"asg-reconciler-plan": ("plan", "apply")},
    "cronjob": {"asg-reconciler-plan": ("plan-once",)},
}
# Calls the code makes that the scenario above does not reach; each says why. (The run loop's cache,
# leader election, Events and status ConfigMap are driven above, so they are measured, not listed.)
NOT_REACHED: dict[str, set[Call]] = {
    "apply": {
        # reconciler/kube/drain.py _pod_state: when an eviction fails with a 5xx or gets no answer,
        # apply reads the pod to learn whether it left all the same. Needs a failing API server.
        Call("get", "", "pods", "shop", "web-b"),
    },
}


def test_every_call_is_granted_and_every_grant_is_used(
    measured: tuple[World, dict[str, set[Call]]], capsys: pytest.CaptureFixture[str]
) -> None:
    world, calls = measured
    cluster = load_config(world.config).cluster
    found: list[str] = []
    for name, accounts in ACCOUNTS.items():
        objects = overlay(name)
        configs = [
            yaml.safe_load(c["data"]["config.yaml"])
            for c in find(objects, "ConfigMap")
            if "config.yaml" in (c.get("data") or {})
        ]
        (rendered,) = {c["cluster"] for c in configs}
        assert {c["run"]["namespace"] for c in configs} == {NAMESPACE}
        for account, stages in accounts.items():
            made = set().union(*(calls[s] for s in stages), *(NOT_REACHED.get(s, set()) for s in stages))
            found += problems(f"{name} {account}", made, grants(objects, account, cluster, rendered))
    with capsys.disabled():
        for stage, made in sorted(calls.items()):
            print(f"\n{stage}:", *(f"  {c}" for c in sorted(made)), sep="\n")
    assert not found, "\n".join(found)


def test_the_request_mapping_follows_the_api_servers_rules() -> None:
    def call(method: str, path: str, **query: str) -> Call:
        return rbac_call(RecordedRequest(method, path, query, {}))

    assert call("GET", "/api/v1/pods") == Call("list", "", "pods", "", "")
    assert call("GET", "/api/v1/pods", watch="true") == Call("watch", "", "pods", "", "")
    assert call("GET", "/api/v1/nodes/n1") == Call("get", "", "nodes", "", "n1")
    assert call("PATCH", "/api/v1/nodes/n1") == Call("patch", "", "nodes", "", "n1")
    assert call("POST", "/api/v1/namespaces/shop/pods/web/eviction") == Call(
        "create", "", "pods/eviction", "shop", "web"
    )
    assert call("POST", "/apis/coordination.k8s.io/v1/namespaces/x/leases") == Call(
        "create", "coordination.k8s.io", "leases", "x", ""
    )
    assert call("PUT", "/apis/apps/v1/namespaces/x/daemonsets/d") == Call(
        "update", "apps", "daemonsets", "x", "d"
    )
    assert call("DELETE", "/api/v1/namespaces/x/pods") == Call("deletecollection", "", "pods", "x", "")
    assert call("GET", "/apis/policy/v1/poddisruptionbudgets") == Call(
        "list", "policy", "poddisruptionbudgets", "", ""
    )
