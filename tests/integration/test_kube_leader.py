"""LeaderElector against the fake API over HTTP, with short client-go timings: one leader at a time,
a released Lease changes hands at the next try, a killed leader's only after lease_duration of no
change (judged on the follower's clock, whatever the holder's renewTime says), and a leader that
cannot reach the API server steps down before anyone could take over."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.kube.leader import JITTER_FACTOR, LeaderElector
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client

NS = "kube-system"
NAME = "asg-reconciler-plan-leader-prod"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
LEASE, RENEW, RETRY = 2.0, 1.0, 0.2  # whole seconds for the lease: leaseDurationSeconds is an integer
MARGIN = 0.25  # scheduling slack on a shared 2-core machine


class Changes:
    """on_change's calls, each with the monotonic time it came."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, bool]] = []

    def __call__(self, leading: bool) -> None:
        self.calls.append((time.monotonic(), leading))

    def wait_for(self, leading: bool, timeout: float) -> float:
        """The time of the first call with `leading`, waiting up to `timeout` for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, value in list(self.calls):
                if value == leading:
                    return at
            time.sleep(0.005)
        raise AssertionError(f"no on_change({leading}) within {timeout}s: {self.calls}")


Make = Callable[..., tuple[LeaderElector, Changes]]


@pytest.fixture
def make(kube_client: client.ApiClient) -> Iterator[Make]:
    """Builds electors (not started); every one is stopped without release at the end, so no thread
    outlives the test and writes into the next one's fake API."""
    made: list[LeaderElector] = []

    def build(identity: str, api: client.ApiClient | None = None) -> tuple[LeaderElector, Changes]:
        changes = Changes()
        elector = LeaderElector(
            api or kube_client,
            NS,
            NAME,
            identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            on_change=changes,
        )
        made.append(elector)
        return elector, changes

    yield build
    for elector in made:
        elector.stop(release=False)


def spec(kube_api: FakeKubeAPI) -> dict[str, Any]:
    lease = kube_api.get_object("Lease", NS, NAME)
    assert lease is not None
    return dict(lease["spec"])


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def first_leader(electors: list[LeaderElector], timeout: float = 3.0) -> LeaderElector:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leading = [e for e in electors if e.is_leader()]
        if leading:
            assert len(leading) == 1
            return leading[0]
        time.sleep(0.01)
    raise AssertionError("nobody leads")


def leaders_over(electors: list[LeaderElector], seconds: float) -> set[int]:
    """How many electors led at once, sampled every 10 ms for `seconds`."""
    counts: set[int] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        counts.add(sum(e.is_leader() for e in electors))
        time.sleep(0.01)
    return counts


def test_one_of_two_leads_and_a_release_hands_over_at_the_next_try(kube_api: FakeKubeAPI, make: Make) -> None:
    (a, a_changes), (b, b_changes) = make("host-a_1"), make("host-b_2")
    assert not a.is_leader()
    a.start()
    b.start()
    leader = first_leader([a, b])
    other, other_changes = (b, b_changes) if leader is a else (a, a_changes)
    leader_changes = a_changes if leader is a else b_changes
    first = spec(kube_api)
    assert first["holderIdentity"] == leader.identity
    assert first["leaseDurationSeconds"] == 2
    assert first["leaseTransitions"] == 0

    assert leaders_over([a, b], 1.0) == {1}
    renewed = spec(kube_api)
    assert renewed["holderIdentity"] == leader.identity
    assert stamp(renewed["renewTime"]) > stamp(first["renewTime"])  # renewed every retry_period
    assert stamp(renewed["acquireTime"]) == stamp(first["acquireTime"])

    released_at = time.monotonic()
    leader.stop(release=True)
    assert not leader.is_leader()
    assert leader_changes.calls[-1][1] is False
    took_over = other_changes.wait_for(True, 2.0) - released_at
    assert took_over < RETRY * (1 + JITTER_FACTOR) + MARGIN, took_over  # no expiry wait
    after = spec(kube_api)
    assert after["holderIdentity"] == other.identity
    assert after["leaseTransitions"] == 1
    assert other.is_leader()


def test_release_clears_the_holder_as_release_on_cancel_does(kube_api: FakeKubeAPI, make: Make) -> None:
    a, _ = make("host-a_1")
    a.start()
    assert a.wait(3.0)
    a.stop(release=True)
    released = spec(kube_api)
    assert "holderIdentity" not in released
    assert released["leaseDurationSeconds"] == 1
    assert released["leaseTransitions"] == 0


def test_a_killed_leader_is_replaced_only_after_lease_duration(kube_api: FakeKubeAPI, make: Make) -> None:
    (a, _), (b, b_changes) = make("host-a_1"), make("host-b_2")
    a.start()
    assert a.wait(3.0)
    b.start()
    assert leaders_over([a, b], 0.6) == {1}
    assert a.is_leader()

    killed_at = time.monotonic()
    a.stop(release=False)  # SIGKILL: the thread is gone, the Lease still names it
    last = spec(kube_api)
    assert last["holderIdentity"] == a.identity

    took_over_at = b_changes.wait_for(True, LEASE + 2.0)
    taken = spec(kube_api)
    assert taken["holderIdentity"] == b.identity
    assert taken["leaseTransitions"] == 1
    # not before lease_duration after the last renewal b saw (same machine: wall clocks agree)
    assert (stamp(taken["acquireTime"]) - stamp(last["renewTime"])).total_seconds() >= LEASE
    took_over = took_over_at - killed_at
    assert LEASE - RETRY - 0.05 <= took_over < LEASE + RETRY * (1 + JITTER_FACTOR) + MARGIN, took_over


@pytest.mark.parametrize("renewed", ["2020-01-01T00:00:00.000000Z", "2099-01-01T00:00:00.000000Z"])
def test_expiry_is_judged_on_the_followers_clock_not_the_holders_renew_time(
    kube_api: FakeKubeAPI, make: Make, renewed: str
) -> None:
    """A holder whose clock is years behind or ahead: the follower waits lease_duration from when it
    first saw the record, neither taking over at once nor never."""
    kube_api.put(k.lease(NAME, NS, holder="ghost_0", duration_seconds=2, renew_time=renewed))
    a, a_changes = make("host-a_1")
    started = time.monotonic()
    a.start()
    took_over = a_changes.wait_for(True, LEASE + 2.0) - started
    assert LEASE <= took_over < LEASE + RETRY * (1 + JITTER_FACTOR) + MARGIN, took_over
    assert spec(kube_api)["leaseTransitions"] == 1


def test_a_leader_steps_down_within_renew_deadline_when_the_api_server_fails(
    kube_api: FakeKubeAPI, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    a, a_changes = make("host-a_1")
    a.start()
    assert a.wait(3.0)
    caplog.set_level("INFO", logger="reconciler.kube.leader")

    failing_at = time.monotonic()
    kube_api.fault = lambda method, path, query: (500, None) if path == LEASE_PATH else None
    down_at = a_changes.wait_for(False, RENEW + 1.0)
    assert not a.is_leader()
    # within renew_deadline of the last renewal (at most one retry_period before the fault), and
    # so before any follower could have taken over (lease_duration after it saw that renewal)
    assert down_at - failing_at <= RENEW + MARGIN, down_at - failing_at
    assert down_at < failing_at - RETRY + LEASE
    time.sleep(0.5)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # once, not once per try
    assert "HTTP 500" in warnings[0].getMessage()

    kube_api.fault = None
    assert a.wait(2.0)  # still named in the Lease: it renews and leads again
    assert spec(kube_api)["leaseTransitions"] == 0
    assert any("answers again" in r.getMessage() for r in caplog.records)


class Partition:
    """A TCP forwarder to the fake API that can be cut: then it swallows what the client sends and
    answers nothing, as a hung API server or a network partition looks from the client."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.cut = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                return
            self._sockets += [conn, upstream]
            threading.Thread(target=self._pipe, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, conn), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
                if not data:
                    break
                if not self.cut.is_set():
                    sink.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.server.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()


def test_a_partitioned_leader_steps_down_before_the_other_takes_over(
    kube_api: FakeKubeAPI, make: Make
) -> None:
    partition = Partition(kube_api.port)
    through = make_api_client(f"http://127.0.0.1:{partition.port}")
    try:
        (a, a_changes), (b, b_changes) = make("host-a_1", through), make("host-b_2")
        a.start()
        assert a.wait(3.0)
        b.start()
        assert leaders_over([a, b], 0.5) == {1}

        cut_at = time.monotonic()
        partition.cut.set()  # a's calls now hang: only their timeouts end them
        down_at = a_changes.wait_for(False, RENEW + 1.0)
        up_at = b_changes.wait_for(True, LEASE + 2.0)
        assert down_at - cut_at <= RENEW + MARGIN, down_at - cut_at
        assert down_at < up_at
        assert up_at - cut_at >= LEASE - RETRY - 0.05
        assert spec(kube_api)["holderIdentity"] == b.identity

        partition.cut.clear()  # a hears again: b holds a live Lease, a stays a follower
        assert leaders_over([a, b], 0.8) == {1}
        assert b.is_leader()
    finally:
        partition.close()
        through.close()


@pytest.mark.parametrize("lease", ["released", "absent"])
def test_racing_electors_leave_exactly_one_leader(kube_api: FakeKubeAPI, make: Make, lease: str) -> None:
    """Five electors read the same Lease (or its absence) before any write lands (writes are held
    back 150 ms): the resourceVersion (or AlreadyExists) lets one write through; the others get 409
    and read again."""
    if lease == "released":
        kube_api.put(k.lease(NAME, NS, transitions=3))
    kube_api.fault = lambda method, path, query: 0.15 if method in ("PATCH", "POST") else None
    electors = [make(f"host-{i}_{i}")[0] for i in range(5)]
    for elector in electors:
        elector.start()
    leader = first_leader(electors, 3.0)
    kube_api.fault = None
    assert leaders_over(electors, 1.0) == {1}
    assert leader.is_leader()
    won = spec(kube_api)
    assert won["holderIdentity"] == leader.identity
    assert won["leaseTransitions"] == (4 if lease == "released" else 0)
    if lease == "released":
        tries = [r for r in kube_api.requests if r.method == "PATCH" and "acquireTime" in r.json()["spec"]]
    else:
        tries = [
            r for r in kube_api.requests if r.method == "POST" and r.path == LEASE_PATH.rsplit("/", 1)[0]
        ]
    assert len(tries) >= 2  # several wrote on the same version; one got through
