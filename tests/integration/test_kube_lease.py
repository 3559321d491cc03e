"""ApplyLease against the fake API over HTTP: one apply at a time, takeover only after expiry (a record
unchanged for leaseDurationSeconds of the taker's own time), and of two racing acquirers exactly one
wins (resourceVersion / AlreadyExists decide). tests/integration/test_apply_lease_clocks.py skews
the clocks."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from reconciler.domain.errors import OperationError, RefusedError
from reconciler.kube.lease import ApplyLease, LeaseLost, micro_time
from tests.support import k8s_objects as k
from tests.support.kube import make_api_client

NAME = "asg-reconciler-apply-prod"
T0 = datetime(2026, 1, 1, 12, 0, 0, 250_000, tzinfo=UTC)


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.value = start

    def __call__(self) -> datetime:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += timedelta(seconds=seconds)

    def monotonic(self) -> float:
        """The same passage of time as a monotonic clock (what every wait is measured on)."""
        return (self.value - T0).total_seconds()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def spec(kube_api: FakeKubeAPI) -> dict[str, Any]:
    obj = kube_api.get_object("Lease", "kube-system", NAME)
    assert obj is not None
    return dict(obj["spec"])


def times(lease_spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with acquireTime/renewTime parsed: a created lease carries the client's own spelling."""
    out = dict(lease_spec)
    for key in ("acquireTime", "renewTime"):
        if key in out:
            out[key] = datetime.fromisoformat(out[key].replace("Z", "+00:00"))
    return out


def lease(kube_client: client.ApiClient, clock: Clock, identity: str = "me", **kw: Any) -> ApplyLease:
    return ApplyLease(
        kube_client, "prod", identity=identity, now=clock, monotonic=clock.monotonic, sleep=clock.sleep, **kw
    )


def test_acquire_renew_release(kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    assert mine.held
    assert times(spec(kube_api)) == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 60,
        "acquireTime": T0,
        "renewTime": T0,
        "leaseTransitions": 0,
    }
    mine.check()

    clock.advance(20)
    mine.renew()
    assert spec(kube_api)["renewTime"] == "2026-01-01T12:00:20.250000Z"
    assert times(spec(kube_api))["acquireTime"] == T0

    mine.release()
    assert not mine.held
    assert "holderIdentity" not in spec(kube_api)
    with pytest.raises(OperationError, match="is not held"):
        mine.check()

    other = lease(kube_client, clock, "other")
    other.acquire()  # released: no need to wait for expiry
    assert spec(kube_api)["holderIdentity"] == "other"
    assert spec(kube_api)["leaseTransitions"] == 1


def test_default_identity_namespace_and_duration(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    mine = ApplyLease(kube_client, "prod")
    assert re.fullmatch(r".+-\d+-[0-9a-f]{8}", mine.identity)
    assert mine.identity != ApplyLease(kube_client, "prod").identity
    assert mine.renew_every == 20
    mine.acquire()
    lease_spec = spec(kube_api)
    assert lease_spec["holderIdentity"] == mine.identity
    assert lease_spec["leaseDurationSeconds"] == 60
    # MicroTime always with six fractional digits, which the API server's parser requires
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|\+00:00)", lease_spec["renewTime"])


def test_create_writes_six_fractional_digits_on_a_whole_second(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient
) -> None:
    """MicroTime exactly as the API server parses it (the client's own isoformat() would drop a zero
    fraction, and the server refuses that)."""
    lease(kube_client, Clock(datetime(2026, 1, 1, 12, 0, tzinfo=UTC))).acquire()
    assert spec(kube_api)["acquireTime"] == "2026-01-01T12:00:00.000000Z"
    assert spec(kube_api)["renewTime"] == "2026-01-01T12:00:00.000000Z"


def test_refused_while_another_holder_is_fresh(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    kube_api.put(
        k.lease(NAME, holder="ci-runner-7", duration_seconds=60, renew_time=T0 - timedelta(seconds=12))
    )
    before = spec(kube_api)
    with pytest.raises(RefusedError) as refused:
        lease(kube_client, clock).acquire()
    assert str(refused.value) == (
        "another apply holds lease kube-system/asg-reconciler-apply-prod "
        "(holder ci-runner-7, renewed 12s ago); try again when it is done, or after 48s if it stopped "
        "without releasing it"
    )
    assert refused.value.kind == "lease"
    assert refused.value.exit_code == 3
    assert spec(kube_api) == before


def test_takeover_when_the_holder_let_it_expire(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    kube_api.put(
        k.lease(
            NAME,
            holder="crashed",
            duration_seconds=30,  # the holder's own duration decides, not ours
            acquire_time=T0 - timedelta(hours=1),
            renew_time=T0 - timedelta(seconds=31),
            transitions=4,
        )
    )
    mine = lease(kube_client, clock)
    mine.acquire()  # after watching the record unchanged for 30 s of its own time
    assert spec(kube_api) == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 60,
        "acquireTime": micro_time(T0 + timedelta(seconds=30)),
        "renewTime": micro_time(T0 + timedelta(seconds=30)),
        "leaseTransitions": 5,
    }


def test_expiry_is_exact(kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock) -> None:
    kube_api.put(k.lease(NAME, holder="other", duration_seconds=60, renew_time=T0 - timedelta(seconds=59)))
    with pytest.raises(RefusedError, match="renewed 59s ago"):
        lease(kube_client, clock).acquire()
    clock.advance(1)
    lease(kube_client, clock).acquire()
    assert spec(kube_api)["holderIdentity"] == "me"


def _race(kube_api: FakeKubeAPI, method: str, clock: Clock) -> list[str]:
    """Two acquirers with their own clients; the fake holds each one's write until both have read."""
    barrier = threading.Barrier(2, timeout=5)

    def both_read_first(m: str, path: str, query: dict[str, str]) -> None:
        if m == method and "/leases" in path:
            barrier.wait()
        return None

    kube_api.fault = both_read_first
    outcomes: dict[str, str] = {}

    def attempt(identity: str) -> None:
        api_client = make_api_client(kube_api.url)
        try:
            lease(api_client, clock, identity).acquire()
            outcomes[identity] = "won"
        except RefusedError as exc:
            outcomes[identity] = f"refused: {exc}"
        finally:
            api_client.close()

    threads = [threading.Thread(target=attempt, args=(who,)) for who in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    kube_api.fault = None
    return [outcomes["a"], outcomes["b"]]


def test_two_acquirers_racing_to_create_exactly_one_wins(kube_api: FakeKubeAPI, clock: Clock) -> None:
    outcomes = _race(kube_api, "POST", clock)
    assert sorted(o.split(":")[0] for o in outcomes) == ["refused", "won"]
    winner = "a" if outcomes[0] == "won" else "b"
    assert spec(kube_api)["holderIdentity"] == winner
    assert kube_api.calls[("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")] == 2
    loser = next(o for o in outcomes if o != "won")
    assert f"(holder {winner}, renewed 0s ago); try again" in loser


def test_two_acquirers_racing_to_take_over_exactly_one_wins(kube_api: FakeKubeAPI, clock: Clock) -> None:
    kube_api.put(k.lease(NAME, holder="crashed", duration_seconds=60, renew_time=T0 - timedelta(minutes=5)))
    outcomes = _race(kube_api, "PATCH", clock)
    assert sorted(o.split(":")[0] for o in outcomes) == ["refused", "won"]
    winner = "a" if outcomes[0] == "won" else "b"
    assert spec(kube_api)["holderIdentity"] == winner
    assert spec(kube_api)["leaseTransitions"] == 1


def test_renew_after_someone_took_over_raises_lease_lost(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    kube_api.put(k.lease(NAME, holder="thief", duration_seconds=60, renew_time=T0))
    with pytest.raises(LeaseLost, match="lease kube-system/asg-reconciler-apply-prod is now held by thief"):
        mine.renew()
    assert not mine.held
    with pytest.raises(LeaseLost):
        mine.check()
    mine.release()  # not ours any more: left alone
    assert spec(kube_api)["holderIdentity"] == "thief"


def test_renew_rereads_on_a_conflict_that_kept_us_holder(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    current = kube_api.get_object("Lease", "kube-system", NAME)
    assert current is not None
    current["metadata"]["labels"] = {"touched": "yes"}  # someone else's write moves the version
    kube_api.put(current)
    clock.advance(5)
    mine.renew()
    assert spec(kube_api)["renewTime"] == micro_time(T0 + timedelta(seconds=5))
    assert spec(kube_api)["holderIdentity"] == "me"


def test_renew_of_a_deleted_lease_raises_lease_lost(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    kube_api.delete_object("Lease", "kube-system", NAME)
    with pytest.raises(LeaseLost, match="was deleted"):
        mine.renew()


def test_check_renews_once_renewals_lapse_or_fails(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock, duration_seconds=30, retry_wait=0.01)  # renewed every 10s
    mine.acquire()
    clock.advance(19)
    mine.check()
    assert spec(kube_api)["renewTime"] == micro_time(T0)  # only read
    clock.advance(1)  # a renewal period short of the duration: another apply could take it before
    mine.check()  # ... so the check renews it first, on the version it just read
    assert spec(kube_api)["renewTime"] == micro_time(T0 + timedelta(seconds=20))
    clock.advance(25)
    kube_api.fault = failing(1, "PATCH", (500, None))
    with pytest.raises(
        OperationError, match=r"was not renewed for 25s \(duration 30s\) and cannot be renewed now"
    ):
        mine.check()


def test_context_manager_renews_in_the_background_and_releases(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    with lease(kube_client, clock, renew_every=0.01) as mine:
        assert spec(kube_api)["holderIdentity"] == "me"
        clock.advance(25)
        deadline = time.monotonic() + 2
        while spec(kube_api)["renewTime"] != micro_time(T0 + timedelta(seconds=25)):
            assert time.monotonic() < deadline, "the lease was not renewed in the background"
            time.sleep(0.01)
        clock.advance(50)  # 75 s after acquiring: only the renewals keep check() happy
        deadline = time.monotonic() + 2
        while spec(kube_api)["renewTime"] != micro_time(T0 + timedelta(seconds=75)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        mine.check()
    assert "holderIdentity" not in spec(kube_api)
    assert not mine.held


def test_context_manager_stops_renewing_once_lost(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    with lease(kube_client, clock, renew_every=0.01) as mine:
        kube_api.put(k.lease(NAME, holder="thief", duration_seconds=60, renew_time=T0))
        deadline = time.monotonic() + 2
        while mine.held:
            assert time.monotonic() < deadline, "the renewer did not notice the takeover"
            time.sleep(0.01)
        with pytest.raises(LeaseLost, match="now held by thief"):
            mine.check()
    assert spec(kube_api)["holderIdentity"] == "thief"  # release left the thief's lease alone


def test_context_manager_refuses_without_starting_a_renewer(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    kube_api.put(k.lease(NAME, holder="other", duration_seconds=60, renew_time=T0))
    with pytest.raises(RefusedError), lease(kube_client, clock, renew_every=0.01):
        pytest.fail("entered without the lease")
    assert not [t for t in threading.enumerate() if t.name.startswith("lease-")]
    assert spec(kube_api)["holderIdentity"] == "other"


def test_api_errors_are_one_line(kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock) -> None:
    kube_api.fault = lambda method, path, query: (500, None)
    with pytest.raises(
        OperationError, match=r"^Kubernetes API: read lease kube-system/asg-reconciler-apply-prod"
    ):
        lease(kube_client, clock, retry_wait=0.01).acquire()


# ------------------------------------------------------------- the records' anchor (issue 8, hole 6)

ANCHOR = "asg-reconciler.dev/last-record"
DIGEST = "ab" * 32


def annotations(kube_api: FakeKubeAPI) -> dict[str, str]:
    obj = kube_api.get_object("Lease", "kube-system", NAME)
    assert obj is not None
    return dict(obj["metadata"].get("annotations") or {})


def test_the_anchor_is_set_by_the_holder_kept_across_holders_and_read_on_acquire(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    assert mine.anchor is None and mine.annotations == {}  # a new Lease: no anchor yet
    before = spec(kube_api)
    mine.set_anchor(DIGEST)
    assert annotations(kube_api) == {ANCHOR: DIGEST} and mine.anchor == DIGEST
    assert spec(kube_api) == before  # only the annotation changed
    clock.advance(5)
    mine.renew()  # the version it moved to is ours: renewing still works
    mine.set_anchor("cd" * 32)
    mine.release()
    assert annotations(kube_api) == {ANCHOR: "cd" * 32}  # release leaves the anchor

    nxt = lease(kube_client, clock, "next")
    nxt.acquire()
    assert nxt.anchor == "cd" * 32


def test_read_anchor_without_acquiring(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    reader = lease(kube_client, clock, "dry-run", retry_wait=0.01)
    assert reader.read_anchor() is None  # no Lease at all
    held = k.lease(NAME, holder="other", duration_seconds=60, renew_time=T0)
    held["metadata"]["annotations"] = {ANCHOR: DIGEST}
    kube_api.put(held)
    kube_api.fault = failing(1, "GET", (503, None))
    assert reader.read_anchor() == DIGEST  # held by another apply: read all the same
    assert not reader.held and spec(kube_api)["holderIdentity"] == "other"


def test_the_anchor_survives_an_expired_takeover(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    crashed = k.lease(NAME, holder="crashed", duration_seconds=60, renew_time=T0 - timedelta(minutes=5))
    crashed["metadata"]["annotations"] = {ANCHOR: DIGEST, "other": "kept"}
    kube_api.put(crashed)
    mine = lease(kube_client, clock)
    mine.acquire()
    assert mine.anchor == DIGEST and mine.annotations == {ANCHOR: DIGEST, "other": "kept"}


def test_set_anchor_only_while_held(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    with pytest.raises(OperationError, match="is not held"):
        mine.set_anchor(DIGEST)
    mine.acquire()
    kube_api.put(k.lease(NAME, holder="thief", duration_seconds=60, renew_time=T0))  # took it over
    with pytest.raises(LeaseLost, match="now held by thief"):
        mine.set_anchor(DIGEST)
    assert annotations(kube_api) == {} and not mine.held
    with pytest.raises(LeaseLost):
        mine.set_anchor(DIGEST)  # and stays lost


def test_set_anchor_retries_a_conflict_that_kept_us_holder(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    current = kube_api.get_object("Lease", "kube-system", NAME)
    assert current is not None
    current["metadata"]["labels"] = {"touched": "yes"}  # someone else's write moves the version
    kube_api.put(current)
    mine.set_anchor(DIGEST)
    assert annotations(kube_api) == {ANCHOR: DIGEST}
    patches = kube_api.calls[("PATCH", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{NAME}")]
    assert patches == 2  # the conflicting try, then the retry on the version read again


def test_set_anchor_on_a_deleted_lease_raises_lease_lost(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock)
    mine.acquire()
    kube_api.delete_object("Lease", "kube-system", NAME)
    with pytest.raises(LeaseLost, match="was deleted"):
        mine.set_anchor(DIGEST)


def failing(times: int, method: str, answer: Any) -> Any:
    """A fault answering `answer` to the first `times` lease requests of `method`."""
    seen: list[int] = []

    def fault(m: str, path: str, query: dict[str, str]) -> Any:
        if m == method and "/leases" in path and len(seen) < times:
            seen.append(1)
            return answer
        return None

    return fault


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("GET", (500, None)),
        ("GET", (503, None)),
        ("PATCH", (500, None)),
        ("GET", (429, None)),
        ("GET", "drop"),
    ],
)
def test_acquire_rides_out_a_transient_failure(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock, method: str, answer: Any
) -> None:
    kube_api.put(k.lease(NAME, holder="crashed", duration_seconds=60, renew_time=T0 - timedelta(minutes=5)))
    kube_api.fault = failing(2, method, answer)
    mine = lease(kube_client, clock, retry_wait=0.01)
    mine.acquire()
    assert mine.held and spec(kube_api)["holderIdentity"] == "me"


def test_set_anchor_rides_out_a_transient_failure(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    mine = lease(kube_client, clock, retry_wait=0.01)
    mine.acquire()
    kube_api.fault = failing(2, "PATCH", (502, None))
    mine.set_anchor(DIGEST)
    assert annotations(kube_api) == {ANCHOR: DIGEST}


def test_a_lasting_or_permanent_failure_is_not_retried_forever(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock
) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{NAME}"
    kube_api.fault = lambda method, p, query: (500, None)
    with pytest.raises(OperationError, match="HTTP 500"):
        lease(kube_client, clock, retry_wait=0.01).acquire()
    assert kube_api.calls[("GET", path)] == 4  # a few tries, then the one-line error
    kube_api.calls.clear()
    kube_api.fault = lambda method, p, query: (403, None)
    with pytest.raises(OperationError, match="forbidden"):
        lease(kube_client, clock, retry_wait=0.01).acquire()
    assert kube_api.calls[("GET", path)] == 1  # RBAC does not fix itself


def test_a_transient_failure_is_tried_again_after_retry_wait_then_twice_then_four_times_it(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lease's own retry schedule (kept when it moved onto domain/backoff.py): four tries of a
    call, retry_wait apart, doubled each time."""
    slept: list[float] = []
    waiting = SimpleNamespace(sleep=slept.append, monotonic=time.monotonic)
    monkeypatch.setattr("reconciler.kube.lease.time", waiting)
    kube_api.fault = lambda method, p, query: (503, None)
    with pytest.raises(OperationError, match="HTTP 503"):
        lease(kube_client, clock, retry_wait=0.5).acquire()
    assert slept == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("status", [501, 505])
def test_a_501_or_505_is_an_answer_not_a_blip(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: Clock, status: int
) -> None:
    """The Lease asks kube/retry.py's one transient predicate, as every other Kubernetes call does."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{NAME}"
    kube_api.fault = lambda method, p, query: (status, None)
    with pytest.raises(OperationError, match=f"HTTP {status}"):
        lease(kube_client, clock, retry_wait=0.01).acquire()
    assert kube_api.calls[("GET", path)] == 1
