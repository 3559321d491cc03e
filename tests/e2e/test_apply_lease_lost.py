"""An apply that lost its Lease writes nothing more (issue 24, item 5), end to end: the CLI in-process
against moto, the fake Kubernetes API and a bare repository.

Apply A is paused mid-drain past its Lease; replica B takes the Lease over and taints the same node
for its own drain; A goes on. Before this was fixed, A's failed drain gave "its" node back (removing
B's taint), its final sweep did the same, and it pushed a signed record before failing at the anchor.
Now every write — to the cluster, to AWS, to Git — reads the Lease first, and a Lease that is someone
else's stops the run on the spot: exit 1, one line naming the new holder.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import pytest

from reconciler.domain.model import OWN_DRAIN_TAINT
from reconciler.runtime import apply_stage
from tests.support import k8s_objects as k
from tests.support.apply_world import NOTES, World, approved, pod
from tests.support.aws import on_every_session
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen

LEASE = "asg-reconciler-apply-prod"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE}"
AWS_WRITES = ("SetDesiredCapacity", "TerminateInstanceInAutoScalingGroup")


def notes(world: World) -> str:
    return git("for-each-ref", NOTES, cwd=world.remote)


def taints(world: World, node: str) -> list[dict[str, Any]]:
    obj = world.kube.get_object("Node", None, node)
    assert obj is not None
    return list(obj["spec"].get("taints") or [])


def aws_calls(monkeypatch: pytest.MonkeyPatch, log: list[str]) -> None:
    """Every AWS request the code under test sends, as `aws <Operation>`, in order."""

    def sent(model: Any, **_: Any) -> None:
        log.append(f"aws {model.name}")

    on_every_session(monkeypatch, "before-call", sent)


def test_an_apply_that_lost_its_lease_mid_drain_writes_nothing_more(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)
    before = notes(world)
    theirs = {"key": OWN_DRAIN_TAINT, "value": "b" * 40, "effect": "NoSchedule"}
    taken = threading.Event()
    after_loss: list[str] = []  # every write that reached the cluster or AWS once B held the Lease

    def paused_then_taken(method: str, path: str, query: dict[str, str]) -> None:
        """At A's drain's first look at node-b: A 'was paused' long enough for B to take the Lease
        and start its own drain of node-b (B's writes go straight to the store)."""
        if taken.is_set():
            if method != "GET":
                after_loss.append(f"kube {method} {path}")
            return None
        if (
            method == "GET"
            and path == "/api/v1/pods"
            and "spec.nodeName=node-b" in query.get("fieldSelector", "")
        ):
            world.kube.put(k.lease(LEASE, "kube-system", holder="replica-b", renew_time=datetime.now(UTC)))
            node = world.kube.get_object("Node", None, "node-b")
            assert node is not None
            node["spec"]["taints"] = [theirs]
            world.kube.put(node)
            taken.set()
        return None

    aws_log: list[str] = []
    aws_calls(monkeypatch, aws_log)

    def aws_after_loss(model: Any, **_: Any) -> None:
        if taken.is_set():
            after_loss.append(f"aws {model.name}")

    on_every_session(monkeypatch, "before-call", aws_after_loss)
    world.kube.fault = paused_then_taken
    result = world.cli(capsys, "apply")
    world.kube.fault = None

    assert taken.is_set(), "the drain never looked at node-b"
    assert result.code == 1, result.out + result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: lease kube-system/{LEASE} is now held by replica-b: this apply stopped at once and "
        "wrote nothing more to the cluster, AWS or Git"
    ], result.err
    assert "Traceback" not in result.err
    assert taints(world, "node-b") == [theirs]  # B's taint survives
    web_b = world.kube.get_object("Pod", "shop", "web-b")
    assert web_b is not None and not web_b["metadata"].get("deletionTimestamp")  # never evicted by A
    assert after_loss == []  # no write to the cluster or AWS after the loss, not even a give-back
    assert not [c for c in aws_log if c.removeprefix("aws ") in AWS_WRITES]
    assert world.desired() == 2 and world.b_id in world.in_service()
    assert notes(world) == before  # no record pushed
    assert world.kube.get_object("Lease", "kube-system", LEASE)["spec"]["holderIdentity"] == "replica-b"  # type: ignore[index]


def test_a_lease_taken_before_the_termination_stops_the_intent_record_and_the_call(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain finished; B takes the Lease before A records its intent: no intent record, no
    TerminateInstanceInAutoScalingGroup, and node-b keeps its taint for B to finish or give back."""
    approved(world, capsys)
    before = notes(world)
    aws_log: list[str] = []
    aws_calls(monkeypatch, aws_log)
    real_intent = apply_stage._Recorder.intent

    def taken_first(self: Any, group: str, instance: str, before: int, after: int) -> None:
        world.kube.put(k.lease(LEASE, "kube-system", holder="replica-b", renew_time=datetime.now(UTC)))
        real_intent(self, group, instance, before, after)

    monkeypatch.setattr(apply_stage._Recorder, "intent", taken_first)
    result = world.cli(capsys, "apply")
    assert result.code == 1, result.out + result.err
    assert f"error: lease kube-system/{LEASE} is now held by replica-b" in result.err
    assert "TerminateInstanceInAutoScalingGroup" not in " ".join(aws_log)
    assert notes(world) == before
    assert [t["key"] for t in taints(world, "node-b")] == [OWN_DRAIN_TAINT]
    assert world.desired() == 2 and world.b_id in world.in_service()


class Log:
    """One log of a whole apply, in order: the cluster's requests, AWS's and the records' pushes."""

    def __init__(self, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries: list[str] = []
        self._lock = threading.Lock()
        world.kube.fault = self.kube
        on_every_session(monkeypatch, "before-send", self.aws)  # after the clients' before-call hooks
        real_append = apply_stage.append_record

        def pushed(*args: Any, **kwargs: Any) -> Any:
            self.add("git push record")
            return real_append(*args, **kwargs)

        monkeypatch.setattr(apply_stage, "append_record", pushed)

    def add(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)

    def kube(self, method: str, path: str, query: dict[str, str]) -> None:
        self.add(f"kube {method} {path}")
        return None

    def aws(self, request: Any, **_: Any) -> None:
        body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        self.add(f"aws {parse_qs(body).get('Action', ['?'])[0]}")

    def writes(self) -> list[str]:
        """The writes, each checked to come after a GET of the Lease made since the write before."""
        found: list[str] = []
        confirmed = False
        for entry in self.entries:
            if entry == f"kube GET {LEASE_PATH}":
                confirmed = True
                continue
            source, what = entry.split(" ", 1)
            if (
                (source == "kube" and not what.startswith("GET") and "/leases" not in what)
                or (source == "aws" and what in AWS_WRITES)
                or source == "git"
            ):
                assert confirmed, f"{entry}: written without reading the Lease first, in {self.entries}"
                confirmed = False
                found.append(entry)
        return found


def test_every_write_of_a_removal_comes_right_after_a_read_of_the_lease(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between any two writes (the taint, the eviction, the intent record, the termination, the
    result record) there is a GET of the Lease: no write path skips it."""
    approved(world, capsys)
    log = Log(world, monkeypatch)
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 0, result.out + result.err
    assert world.b_id not in world.in_service()
    writes = log.writes()
    assert "kube PATCH /api/v1/nodes/node-b" in writes
    assert "kube POST /api/v1/namespaces/shop/pods/web-b/eviction" in writes
    assert "aws TerminateInstanceInAutoScalingGroup" in writes
    assert writes.count("git push record") == 2  # the intent, the result


def test_every_write_of_a_scale_up_comes_right_after_a_read_of_the_lease(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # node b is busy: no scale-down
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0
    log = Log(world, monkeypatch)
    result = world.cli(capsys, "apply")
    world.kube.fault = None
    assert result.code == 0, result.out + result.err
    assert log.writes() == ["aws SetDesiredCapacity", "git push record"]
