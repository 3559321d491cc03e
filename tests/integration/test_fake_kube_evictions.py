"""The fake API's evictions, disruption controller and ReplicaSet controller behave as the real ones
(kubernetes/kubernetes eviction.go and pkg/controller/disruption), through the official client."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from kubernetes import client

from reconciler.demo.kube_api import FakeKubeAPI
from tests.support import k8s_objects as k

TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def v1(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


def evict(v1: client.CoreV1Api, name: str, namespace: str = "shop", **delete_options: Any) -> Any:
    options = client.V1DeleteOptions(**delete_options) if delete_options else None
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace), delete_options=options
    )
    return v1.create_namespaced_pod_eviction(name, namespace, body)


def refused(v1: client.CoreV1Api, name: str, **delete_options: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(client.ApiException) as e:
        evict(v1, name, **delete_options)
    return int(e.value.status), json.loads(e.value.body)


def web_pod(name: str, *, ready: bool = True, replicaset: str = "web") -> dict[str, Any]:
    pod = k.pod(
        name, "shop", labels={"app": "web"}, node_name="n1", owner_kind="ReplicaSet", owner_name=replicaset
    )
    if not ready:  # running, its readiness probe failing
        for condition in pod["status"]["conditions"]:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"
    return pod


def budget(kube_api: FakeKubeAPI) -> dict[str, Any]:
    pdb = kube_api.get_object("PodDisruptionBudget", "shop", "web")
    assert pdb is not None
    return pdb


def status_numbers(kube_api: FakeKubeAPI) -> tuple[int, int, int, int]:
    """(expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)."""
    s = budget(kube_api)["status"]
    return s["expectedPods"], s["desiredHealthy"], s["currentHealthy"], s["disruptionsAllowed"]


def web(kube_api: FakeKubeAPI, *, unready: tuple[str, ...] = (), **pdb: Any) -> None:
    """ReplicaSet web (3 replicas) with pods web-0..2 on n1, and budget `web` over them."""
    kube_api.put_many(web_pod(f"web-{i}", ready=f"web-{i}" not in unready) for i in range(3))
    kube_api.put(k.replicaset("web", "shop", replicas=3, labels={"app": "web"}, owner_kind=None))
    spec = k.pdb("web", "shop", match_labels={"app": "web"}, **pdb)
    del spec["status"]  # the disruption controller writes it
    kube_api.put(spec)


# ---------------------------------------------------------------------------- the disruption controller


def test_the_disruption_controller_recomputes_the_budget_as_pods_come_and_go(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.pod_termination_seconds = math.inf  # evicted pods stay, terminating
    kube_api.run_controllers(replicasets=True)
    web(kube_api, max_unavailable=1)
    assert status_numbers(kube_api) == (3, 2, 3, 1)
    pdb = budget(kube_api)
    assert pdb["status"]["observedGeneration"] == pdb["metadata"]["generation"] == 1
    assert pdb["status"]["conditions"][0] | {"lastTransitionTime": "-"} == {
        "type": "DisruptionAllowed",
        "status": "True",
        "reason": "SufficientPods",
        "message": "",
        "observedGeneration": 1,
        "lastTransitionTime": "-",
    }

    evict(v1, "web-0")
    evicted = kube_api.get_object("Pod", "shop", "web-0")
    assert evicted is not None and evicted["metadata"]["deletionTimestamp"]
    target = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in target] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    ]
    # the ReplicaSet replaced it at once with a new-named pending pod; the budget counts the
    # terminating pod out and the replacement as not yet healthy
    (replacement,) = [
        p for p in kube_api.objects("Pod", "shop") if p["metadata"]["name"] not in ("web-0", "web-1", "web-2")
    ]
    assert replacement["metadata"]["name"].startswith("web-") and replacement["status"]["phase"] == "Pending"
    assert replacement["metadata"]["ownerReferences"][0]["uid"] == k.make_uid("ReplicaSet", "shop", "web")
    assert status_numbers(kube_api) == (3, 2, 2, 0)
    assert budget(kube_api)["status"]["conditions"][0]["reason"] == "InsufficientPods"
    assert refused(v1, "web-1")[1]["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
        }
    ]

    ready = web_pod(replacement["metadata"]["name"])  # the scheduler and kubelet did their part
    ready["metadata"]["uid"] = replacement["metadata"]["uid"]
    kube_api.put(ready)
    assert status_numbers(kube_api) == (3, 2, 3, 1)
    kube_api.delete_object("Pod", "shop", "web-0")  # its kubelet finished; nothing more changes
    assert status_numbers(kube_api) == (3, 2, 3, 1)


def test_a_stale_budget_answers_429_until_the_controller_has_seen_its_new_spec(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.run_controllers()
    web(kube_api, min_available=1)
    assert status_numbers(kube_api) == (3, 1, 3, 2)
    assert kube_api.disruption is not None
    kube_api.disruption.paused = True  # kube-controller-manager lags behind
    client.PolicyV1Api(v1.api_client).patch_namespaced_pod_disruption_budget(
        "web", "shop", {"spec": {"minAvailable": 2}}
    )
    pdb = budget(kube_api)
    assert (pdb["metadata"]["generation"], pdb["status"]["observedGeneration"]) == (2, 1)

    code, status = refused(v1, "web-0")
    assert (code, status["reason"], status["message"]) == (429, "TooManyRequests", TOO_MANY)
    assert status["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }
    assert kube_api.get_object("Pod", "shop", "web-0") is not None

    kube_api.resume_disruption_controller()
    assert budget(kube_api)["status"]["observedGeneration"] == 2
    assert status_numbers(kube_api) == (3, 2, 3, 1)
    evict(v1, "web-0")
    assert kube_api.get_object("Pod", "shop", "web-0") is None


@pytest.mark.parametrize(
    ("policy", "answer"),
    [(None, 429), ("IfHealthyBudget", 429), ("AlwaysAllow", 201)],
)
def test_an_unready_pod_under_a_budget_short_of_healthy_pods_goes_only_with_always_allow(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api, policy: str | None, answer: int
) -> None:
    kube_api.run_controllers()
    web(kube_api, unready=("web-2",), min_available=3)
    if policy is not None:
        pdb = budget(kube_api)
        pdb["spec"]["unhealthyPodEvictionPolicy"] = policy
        kube_api.put(pdb)
    assert status_numbers(kube_api) == (3, 3, 2, 0)  # web-2 is not healthy: the budget is short

    if answer == 201:
        evict(v1, "web-2")  # an unhealthy pod goes without taking a disruption
        assert kube_api.get_object("Pod", "shop", "web-2") is None
    else:
        code, status = refused(v1, "web-2")
        assert code == 429 and "needs 3 healthy pods and has 2" in status["details"]["causes"][0]["message"]
    assert refused(v1, "web-0")[0] == 429  # a healthy pod is guarded either way
    assert status_numbers(kube_api) == (3 if answer == 429 else 2, 3, 2, 0)


@pytest.mark.parametrize("policy", [None, "IfHealthyBudget", "AlwaysAllow"])
def test_an_unready_pod_goes_without_taking_a_disruption_while_the_budget_is_healthy(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api, policy: str | None
) -> None:
    kube_api.run_controllers()
    web(kube_api, unready=("web-2",), min_available=2)
    if policy is not None:
        pdb = budget(kube_api)
        pdb["spec"]["unhealthyPodEvictionPolicy"] = policy
        kube_api.put(pdb)
    assert status_numbers(kube_api) == (3, 2, 2, 0)  # no disruption allowed, yet enough healthy
    evict(v1, "web-2")
    assert kube_api.get_object("Pod", "shop", "web-2") is None
    assert "disruptedPods" not in budget(kube_api)["status"]  # nothing taken from the budget
    assert refused(v1, "web-0")[0] == 429


def test_percentages_count_the_controllers_scale_and_a_missing_controller_fails_safe(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.run_controllers()
    kube_api.put(k.deployment("front", "shop", replicas=4, labels={"app": "web"}))
    kube_api.put_many(web_pod(f"web-{i}") for i in range(2))  # 2 of the Deployment's 4 are up
    kube_api.put(k.replicaset("web", "shop", replicas=4, labels={"app": "web"}, owner_name="front"))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, min_available="50%"))
    assert status_numbers(kube_api) == (4, 2, 2, 0)  # 50% of the Deployment's 4, rounded up

    kube_api.put(web_pod("stray", replicaset="gone"))  # its ReplicaSet is not there
    status = budget(kube_api)["status"]
    assert status["disruptionsAllowed"] == 0
    (condition,) = status["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "SyncFailed")
    assert condition["message"] == 'found no controllers for pod "stray"'


def test_an_integer_min_available_counts_every_pod_even_unmanaged_ones(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.run_controllers()
    kube_api.put(k.pod("solo", "shop", labels={"app": "web"}, node_name="n1"))  # no controller
    kube_api.put(web_pod("web-0", replicaset="gone"))
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, min_available=1))
    assert status_numbers(kube_api) == (2, 1, 2, 1)


# ----------------------------------------------------------------------------------- eviction answers


def test_a_uid_precondition_never_evicts_a_same_named_replacement(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.run_controllers()
    web(kube_api, max_unavailable=1)
    old_uid = k.make_uid("Pod", "shop", "web-0")
    replacement = web_pod("web-0")  # a StatefulSet-style pod of the same name, another uid
    replacement["metadata"]["uid"] = "0000-new"
    kube_api.put(replacement)

    code, status = refused(v1, "web-0", preconditions=client.V1Preconditions(uid=old_uid))
    assert (code, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        f'Operation cannot be fulfilled on Pod "web-0": the UID in the precondition ({old_uid}) does not '
        "match the UID in record (0000-new). The object might have been deleted and then recreated"
    )
    pod = kube_api.get_object("Pod", "shop", "web-0")
    assert pod is not None and not any(c["type"] == "DisruptionTarget" for c in pod["status"]["conditions"])
    # as the real server: the budget was charged before the precondition was judged, and the name
    # stays in disruptedPods (out of currentHealthy) until the controller's 2-minute timeout
    assert "web-0" in budget(kube_api)["status"]["disruptedPods"]
    assert status_numbers(kube_api) == (3, 2, 2, 0)
    assert refused(v1, "web-0", preconditions=client.V1Preconditions(uid="0000-new"))[0] == 429


def test_a_forced_status_write_conflict_is_409_and_takes_nothing(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    kube_api.run_controllers()
    web(kube_api, max_unavailable=1)
    asked: list[tuple[str, str]] = []

    def conflict_twice(namespace: str, pod: str) -> int | None:
        asked.append((namespace, pod))
        return 409 if len(asked) <= 2 else None

    kube_api.eviction_fault = conflict_twice
    for _ in range(2):
        code, status = refused(v1, "web-0")
        assert (code, status["reason"]) == (409, "Conflict")
        assert status["message"] == (
            'Operation cannot be fulfilled on poddisruptionbudgets.policy "web": the object has been '
            "modified; please apply your changes to the latest version and try again"
        )
        assert status_numbers(kube_api) == (3, 2, 3, 1)  # nothing taken
    evict(v1, "web-0")
    assert asked == [("shop", "web-0")] * 3
    assert kube_api.get_object("Pod", "shop", "web-0") is None


def test_a_forced_500_and_the_several_budgets_500(kube_api: FakeKubeAPI, v1: client.CoreV1Api) -> None:
    web(kube_api, max_unavailable=1)
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=1))
    kube_api.eviction_fault = lambda namespace, pod: 500
    code, status = refused(v1, "web-0")
    assert (code, status["message"]) == (500, "Internal error occurred: etcdserver: request timed out")
    assert budget(kube_api)["status"]["disruptionsAllowed"] == 1
    kube_api.eviction_fault = None

    kube_api.put(k.pdb("all", "shop", selector={}))  # a second budget picks every pod too
    code, status = refused(v1, "web-0")
    assert code == 500 and status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support.",
        "code": 500,
    }
    assert kube_api.get_object("Pod", "shop", "web-0") is not None


def test_a_negative_budget_is_forbidden_and_pending_or_terminating_pods_skip_the_budget(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    web(kube_api, max_unavailable=1)
    kube_api.put(k.pdb("web", "shop", match_labels={"app": "web"}, disruptions_allowed=-1))
    code, status = refused(v1, "web-0")
    assert (code, status["reason"], status["message"]) == (
        403,
        "Forbidden",
        'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative',
    )
    kube_api.put(k.pod("web-9", "shop", labels={"app": "web"}))  # pending, on no node
    evict(v1, "web-9")
    leaving = web_pod("web-1")
    leaving["metadata"]["deletionTimestamp"] = k.DEFAULT_TIME
    kube_api.put(leaving)
    evict(v1, "web-1")  # already leaving: evicted again without asking the budget
    assert {p["metadata"]["name"] for p in kube_api.objects("Pod", "shop")} == {"web-0", "web-2"}


def test_the_replicaset_controller_replaces_a_deleted_pod_and_is_off_by_default(
    kube_api: FakeKubeAPI, v1: client.CoreV1Api
) -> None:
    web(kube_api, max_unavailable=1)
    v1.delete_namespaced_pod("web-0", "shop")
    assert len(kube_api.objects("Pod", "shop")) == 2  # off: nothing replaces it

    kube_api.run_controllers(disruption=False, replicasets=True)
    v1.delete_namespaced_pod("web-1", "shop")
    names = sorted(p["metadata"]["name"] for p in kube_api.objects("Pod", "shop"))
    assert len(names) == 3 and "web-1" not in names and "web-2" in names  # back to its 3 replicas
    new = [p for p in kube_api.objects("Pod", "shop") if p["metadata"]["name"] != "web-2"]
    assert all(p["metadata"]["generateName"] == "web-" and not p["spec"].get("nodeName") for p in new)
    v1.list_namespaced_pod("shop")  # the official client accepts what the controller wrote
