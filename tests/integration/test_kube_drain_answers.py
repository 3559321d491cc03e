"""Every answer a real API server gives an eviction, and what a drain does with it (issue 19): as
cluster-autoscaler, anything but 201 and 404 is tried again, with capped and jittered backoff, until
the drain's timeout; the pod's reason is the server's; and an eviction names the uid it was decided
for, so a same-named replacement is never evicted in its predecessor's place."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import pytest
from kubernetes import client

from reconciler.demo.kube_api import DROP, FakeKubeAPI, FaultResult, Query
from reconciler.kube.drain import DrainResult, NodeDrainer, retry_delay
from tests.support import k8s_objects as k
from tests.support.kube_drain import FakeClock, evictions

RBAC = (
    'pods "web-0" is forbidden: User "system:serviceaccount:kube-system:asg-reconciler-apply" cannot '
    'create resource "pods/eviction" in API group "" in the namespace "shop"'
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def drainer(
    kube_client: client.ApiClient,
    clock: FakeClock,
    *,
    timeout_s: float = 30,
    poll: float = 2,
    jitter: Callable[[], float] = lambda: 1.0,
) -> NodeDrainer:
    return NodeDrainer(
        kube_client,
        timeout=timedelta(seconds=timeout_s),
        poll_seconds=poll,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        jitter=jitter,
    )


def web(kube_api: FakeKubeAPI, *, allowed: int = 1) -> None:
    """Node n1 running shop/web-0, whose budget allows `allowed` disruptions."""
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("web-0", "shop", labels={"app": "web"}, node_name="n1", owner_kind="ReplicaSet"))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=allowed))


def tries_at(kube_api: FakeKubeAPI, clock: FakeClock) -> list[float]:
    """Record the clock's time at each eviction request (a fault hook that lets them through)."""
    times: list[float] = []

    def note(method: str, path: str, query: Query) -> FaultResult:
        if path.endswith("/eviction"):
            times.append(clock.t - 1000)
        return None

    kube_api.fault = note
    return times


def test_two_conflicts_then_201_complete_the_drain(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    web(kube_api)
    answers = iter([409, 409])
    kube_api.eviction_fault = lambda namespace, pod: next(answers, None)  # the budget's status write
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", ("shop/web-0",), True, "")
    assert evictions(kube_api) == ["web-0"] * 3
    assert clock.sleeps == [1, 2]  # backoff 1s, then 2s
    assert kube_api.get_object("Pod", "shop", "web-0") is None


FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": RBAC}
FORBIDDEN |= {"reason": "Forbidden", "code": 403}
PDB_CONFLICT = (
    'Operation cannot be fulfilled on poddisruptionbudgets.policy "web": the object has been modified; '
    "please apply your changes to the latest version and try again"
)

# answer -> (what makes the server give it, the answer to inject (None: the server's own), the reason)
ANSWERS: dict[str, tuple[Callable[[FakeKubeAPI], object], FaultResult, str]] = {
    "409": (
        lambda api: setattr(api, "eviction_fault", lambda namespace, pod: 409),
        None,
        f"eviction answered HTTP 409 {PDB_CONFLICT}",
    ),
    "403": (lambda api: None, (403, FORBIDDEN), f"eviction answered HTTP 403 {RBAC}"),
    "negative budget": (
        lambda api: api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=-1)),
        None,
        'eviction answered HTTP 403 poddisruptionbudget.policy "web" is forbidden: pdb disruptions '
        "allowed is negative",
    ),
    "400": (lambda api: None, (400, None), "eviction answered HTTP 400 injected fault 400"),
}


@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_an_answer_that_does_not_change_is_retried_with_capped_backoff_until_the_timeout(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, answer: str
) -> None:
    web(kube_api)
    setup, injected, why = ANSWERS[answer]
    setup(kube_api)
    times: list[float] = []

    def answer_at(method: str, path: str, query: Query) -> FaultResult:
        if not path.endswith("/eviction"):
            return None
        times.append(clock.t - 1000)
        return injected

    kube_api.fault = answer_at
    result = drainer(kube_client, clock, timeout_s=100).drain("n1")
    assert result == DrainResult("n1", (), False, f"1 pod still on the node after 1m40s: shop/web-0 ({why})")
    assert times == [0, 1, 3, 7, 15, 31, 61, 91]  # 1, 2, 4, 8, 16s apart, then at most 30s
    assert max(clock.sleeps) == 2 and sum(clock.sleeps) == 100  # the node is looked at every poll
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


@pytest.mark.parametrize("answer", [500, 503, DROP])
def test_server_errors_and_lost_connections_are_retried_until_the_timeout(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, answer: int | str
) -> None:
    web(kube_api)
    outcome: FaultResult = DROP if answer == DROP else (int(answer), None)
    kube_api.fault = lambda m, p, q: outcome if p.endswith("/eviction") else None
    result = drainer(kube_client, clock, timeout_s=30).drain("n1")
    assert not result.complete
    if answer == DROP:
        assert result.reason.startswith(
            f"1 pod still on the node after 30s: shop/web-0 (eviction got no answer: cannot reach the "
            f"Kubernetes API at {kube_api.url}: "
        )
    else:
        assert result.reason == (
            f"1 pod still on the node after 30s: shop/web-0 (eviction answered HTTP {answer} injected fault "
            f"{answer})"
        )
    assert 8 <= len(evictions(kube_api)) <= 24  # each try is 4 quick attempts; tries back off
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


def test_several_budgets_are_retried_naming_the_servers_reason(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    web(kube_api)
    kube_api.put(k.pdb("all", "shop", selector={}))
    stuck = drainer(kube_client, clock, timeout_s=10).drain("n1")
    assert stuck.reason == (
        "1 pod still on the node after 10s: shop/web-0 (eviction answered HTTP 500 This pod has more than "
        "one PodDisruptionBudget, which the eviction subresource does not support.)"
    )
    kube_api.delete_object("PodDisruptionBudget", "shop", "all")  # a person fixes the budgets
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", ("shop/web-0",), True, "")


def test_a_stale_budget_is_waited_for_as_the_server_asks_and_said_so(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    kube_api.put(k.node("n1"))
    kube_api.put_many(
        k.pod(
            f"web-{i}",
            "shop",
            labels={"app": "web"},
            node_name="n1" if i == 0 else "n2",
            owner_kind="ReplicaSet",
        )
        for i in range(3)
    )
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}))
    kube_api.run_controllers()
    assert kube_api.disruption is not None
    kube_api.disruption.paused = True  # kube-controller-manager lags behind the budget's new spec
    client.PolicyV1Api(kube_client).patch_namespaced_pod_disruption_budget(
        "web", "shop", {"spec": {"minAvailable": 2}}
    )
    times = tries_at(kube_api, clock)
    stale = drainer(kube_client, clock, timeout_s=5).drain("n1")
    assert stale.reason == (
        "1 pod still on the node after 5s: shop/web-0 (pdb shop/web is still being processed by the server: "
        "its status is older than its spec)"
    )
    assert times == [0]  # the server asked for 10s between tries

    clock.sleeps.clear()
    clock.on_sleep = lambda n: kube_api.resume_disruption_controller() if n == 2 else None
    result = drainer(kube_client, clock, timeout_s=30).drain("n1")
    assert result == DrainResult("n1", ("shop/web-0",), True, "")
    assert [t - times[1] for t in times[1:]] == [0, 10]


def test_a_same_named_replacement_is_never_evicted_in_its_predecessors_place(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    """A StatefulSet pod deleted and created again under its name, elsewhere, between the drain's
    look and its eviction: the eviction names the uid it was decided for, the server answers 409,
    and the drain counts its pod gone and looks again."""
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("db-0", "shop", labels={"app": "db"}, node_name="n1", owner_kind="StatefulSet"))
    old_uid = k.make_uid("Pod", "shop", "db-0")
    replaced: list[str] = []

    def replace_first(method: str, path: str, query: Query) -> FaultResult:
        if path.endswith("/eviction") and not replaced:
            replaced.append(path)
            new = k.pod("db-0", "shop", labels={"app": "db"}, node_name="n2", owner_kind="StatefulSet")
            new["metadata"]["uid"] = "uid-of-the-new-db-0"
            kube_api.put(new)
        return None

    kube_api.fault = replace_first
    result = drainer(kube_client, clock).drain("n1")
    assert result == DrainResult("n1", (), True, "")
    survivor = kube_api.get_object("Pod", "shop", "db-0")
    assert survivor is not None and survivor["metadata"]["uid"] == "uid-of-the-new-db-0"
    assert not any(c["type"] == "DisruptionTarget" for c in survivor["status"]["conditions"])
    (request,) = [r for r in kube_api.requests if r.path.endswith("/eviction")]
    assert request.json()["deleteOptions"] == {"preconditions": {"uid": old_uid}}


def test_each_pods_reason_is_logged_once_per_change_not_per_try(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    web(kube_api, allowed=0)
    answers = iter([409, 409, 409])
    kube_api.eviction_fault = lambda namespace, pod: next(answers, None)

    def budget_allows(n: int) -> None:
        if n == 4:
            kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1))

    clock.on_sleep = budget_allows
    with caplog.at_level(logging.INFO, logger="reconciler.kube.drain"):
        result = drainer(kube_client, clock).drain("n1")
    assert result.complete, result.reason
    lines = [r.getMessage() for r in caplog.records if r.name == "reconciler.kube.drain"]
    assert lines == [
        "drain n1: evict shop/web-0: pdb shop/web allows no disruption: needs 1 healthy pods, has 1; "
        "trying again until the drain timeout (30s)",
        "drain n1: evict shop/web-0: eviction answered HTTP 409 Operation cannot be fulfilled on "
        'poddisruptionbudgets.policy "web": the object has been modified; please apply your changes to the '
        "latest version and try again; trying again until the drain timeout (30s)",
    ]
    assert [r.levelname for r in caplog.records if r.name == "reconciler.kube.drain"] == ["INFO", "WARNING"]


def test_the_retry_delay_doubles_to_a_cap_and_is_jittered_into_its_upper_half() -> None:
    assert [retry_delay(n, 1.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert [retry_delay(n, 0.0) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 15, 15]
    assert retry_delay(3, 0.5) == 3
    assert retry_delay(1000, 1.0) == 30  # no overflow however long it goes on


def test_remaining_counts_a_terminating_pod_as_still_on_the_node(
    kube_api: FakeKubeAPI, kube_client: client.ApiClient, clock: FakeClock
) -> None:
    """The last look before an instance is terminated: a pod that landed after the drain and is
    being deleted is still running its shutdown there."""
    kube_api.put(k.node("n1"))
    kube_api.put(k.pod("leaving", "shop", node_name="n1", deletion_timestamp="2026-01-01T00:00:00Z"))
    kube_api.put(k.pod("proxy", "kube-system", node_name="n1", owner_kind="DaemonSet"))
    assert [p["metadata"]["name"] for p in drainer(kube_client, clock).remaining("n1")] == ["leaving"]
