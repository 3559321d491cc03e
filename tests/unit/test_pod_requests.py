"""What the scheduler reserves for a pod, case by case from Kubernetes' own arithmetic
(`component-helpers/resource/helpers.go` `PodRequests`, as kube-scheduler and cluster-autoscaler call
it in 1.33-1.35: `UseStatusResources` on, pod-level resources not skipped).

Every expected value is worked out by hand in the comment beside it. Each case is read three ways:
as plain dicts (a YAML snapshot), through the pruned list decoder (a live listing or a JSON
snapshot) and twice in one reader (the requests cache must not mix pods up).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.domain.model import Pod, Resources
from reconciler.kube.parse import ObjectReader
from reconciler.kube.schema import list_decoder

Mi = 2**20
Gi = 2**30


def c(name: str, cpu: str = "", memory: str = "", **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": name, "resources": {"requests": requests} if requests else {}, **extra}


def status_of(
    name: str,
    *,
    allocated: dict[str, str] | None = None,
    actuated: dict[str, str] | None = None,
    with_resources: bool = True,
) -> dict[str, Any]:
    """A container status as a kubelet writes it (state, image and IDs included: the decoder must
    skip them)."""
    found: dict[str, Any] = {
        "name": name,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "image": "registry.k8s.io/pause:3.9",
        "imageID": "registry.k8s.io/pause@sha256:" + "0" * 64,
        "containerID": "containerd://" + name,
        "ready": True,
        "restartCount": 0,
    }
    if allocated is not None:
        found["allocatedResources"] = allocated
    if with_resources:
        found["resources"] = {"requests": actuated} if actuated is not None else {}
    return found


def pod(
    spec: dict[str, Any],
    statuses: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    name: str = "p",
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "conditions": conditions or []}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {"nodeName": "n1", **spec},
        "status": status,
    }


def read_every_way(raw: dict[str, Any]) -> Resources:
    """The pod's requests, checked equal whichever way it is read."""
    listed = list_decoder("Pod").decode(json.dumps({"kind": "PodList", "items": [raw]}))["items"][0]
    found = {ObjectReader().pod(raw).requests, ObjectReader().pod(listed).requests}
    assert len(found) == 1, found
    return found.pop()


INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
DEFERRED = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]


# ----------------------------------------------------------------------------- pod-level resources


def test_pod_level_requests_replace_the_containers_sum() -> None:
    # containers say 100m + 100m / 64Mi; the pod says 4 / 8Gi: the pod's values are the request
    raw = pod(
        {
            "containers": [c("a", "100m", "64Mi"), c("b", "100m")],
            "resources": {"requests": {"cpu": "4", "memory": "8Gi"}},
        }
    )
    assert read_every_way(raw) == Resources({"cpu": 4000, "memory": 8 * Gi})


def test_a_resource_not_set_at_pod_level_comes_from_the_containers() -> None:
    # cpu at pod level (2); memory: max(app 100Mi + 50Mi, init 400Mi) = 400Mi; the GPU from the app
    spec = {
        "containers": [
            {
                "name": "a",
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi", "nvidia.com/gpu": "1"}},
            },
            c("b", "200m", "50Mi"),
        ],
        "initContainers": [c("i", "50m", "400Mi")],
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
    }
    assert read_every_way(pod(spec)) == Resources({"cpu": 2000, "memory": 400 * Mi, "nvidia.com/gpu": 1})


def test_overhead_is_added_after_the_pod_level_values() -> None:
    # pod level 1 / 1Gi replaces 100m; then RuntimeClass overhead 250m / 120Mi on top
    spec = {
        "containers": [c("a", "100m")],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert read_every_way(pod(spec)) == Resources({"cpu": 1250, "memory": Gi + 120 * Mi})


def test_only_cpu_memory_and_hugepages_are_pod_level_resources() -> None:
    # IsSupportedPodLevelResource: cpu, memory, hugepages-*. A pod-level hugepages request alone
    # replaces nothing the planner counts (hugepages are not modelled), so the containers' 300m
    # stands; an unsupported name at pod level (the API refuses it anyway) is ignored.
    spec = {
        "containers": [c("a", "100m"), c("b", "200m")],
        "resources": {"requests": {"hugepages-2Mi": "64Mi", "ephemeral-storage": "1Gi"}},
    }
    assert read_every_way(pod(spec)) == Resources({"cpu": 300})


def test_pod_level_limits_without_requests_change_nothing() -> None:
    # IsPodLevelRequestsSet looks at requests only (the API server defaults them from limits on
    # create, so a real pod has both)
    spec = {"containers": [c("a", "100m")], "resources": {"limits": {"cpu": "4"}}}
    assert read_every_way(pod(spec)) == Resources({"cpu": 100})


def test_a_daemonset_template_with_pod_level_requests() -> None:
    template = {
        "containers": [c("agent", "10m", "16Mi")],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    daemonset = {
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"template": {"spec": template}},
    }
    assert ObjectReader().daemonset(daemonset).requests == Resources({"cpu": 500, "memory": Gi})


# ----------------------------------------------------------------------------- in-place resize


def test_a_resized_container_counts_the_larger_of_spec_allocated_and_actuated() -> None:
    # a: spec 100m, allocated 300m, actuated 200m (a downsize in progress) -> 300m
    # b: spec 500m (an upsize not yet admitted), allocated = actuated 200m  -> 500m
    # memory of a: spec 64Mi, allocated 128Mi, actuated absent              -> 128Mi
    raw = pod(
        {"containers": [c("a", "100m", "64Mi"), c("b", "500m")]},
        [
            status_of("a", allocated={"cpu": "300m", "memory": "128Mi"}, actuated={"cpu": "200m"}),
            status_of("b", allocated={"cpu": "200m"}, actuated={"cpu": "200m"}),
        ],
        conditions=DEFERRED,
    )
    assert read_every_way(raw) == Resources({"cpu": 800, "memory": 128 * Mi})


def test_an_infeasible_resize_counts_what_the_node_gave_not_the_spec() -> None:
    # PodResizePending reason Infeasible: max(actuated, allocated), the spec's 4 CPU is not counted
    raw = pod(
        {"containers": [c("a", "4", "1Gi")]},
        [
            status_of(
                "a", allocated={"cpu": "500m", "memory": "1Gi"}, actuated={"cpu": "500m", "memory": "1Gi"}
            )
        ],
        conditions=INFEASIBLE,
    )
    assert read_every_way(raw) == Resources({"cpu": 500, "memory": Gi})


def test_a_status_without_resources_leaves_the_spec() -> None:
    # helpers.go (1.33-1.35) consults a status only when its `resources` is set; a container with no
    # status at all (not started yet) counts its spec
    raw = pod(
        {"containers": [c("a", "100m"), c("b", "100m")]},
        [status_of("a", allocated={"cpu": "900m"}, with_resources=False)],
    )
    assert read_every_way(raw) == Resources({"cpu": 200})


def test_sidecars_use_their_status_and_plain_init_containers_their_spec() -> None:
    # sidecar s: spec 100m, allocated 400m -> 400m, added to the app's 200m = 600m;
    # init i: spec 300m (its status, 2 CPU, is not consulted) + sidecars before it (none) = 300m;
    # max(600m, 300m) = 600m
    raw = pod(
        {
            "containers": [c("app", "200m")],
            "initContainers": [c("i", "300m"), c("s", "100m", restartPolicy="Always")],
        },
        [status_of("app", allocated={"cpu": "200m"}, actuated={"cpu": "200m"})],
        init_statuses=[
            status_of("i", allocated={"cpu": "2"}, actuated={"cpu": "2"}),
            status_of("s", allocated={"cpu": "400m"}, actuated={"cpu": "100m"}),
        ],
    )
    assert read_every_way(raw) == Resources({"cpu": 600})


def test_pods_of_one_spec_with_different_statuses_are_not_mixed_up() -> None:
    spec = {"containers": [c("a", "100m")]}
    plain = pod(spec, [status_of("a", allocated={"cpu": "100m"}, actuated={"cpu": "100m"})], name="plain")
    grown = pod(spec, [status_of("a", allocated={"cpu": "1"}, actuated={"cpu": "1"})], name="grown")
    # spec 2 CPU, given 500m: 2 CPU while the resize may still happen, 500m once it is infeasible
    spec2 = {"containers": [c("a", "2")]}
    given = [status_of("a", allocated={"cpu": "500m"}, actuated={"cpu": "500m"})]
    waiting = pod(spec2, given, conditions=DEFERRED, name="waiting")
    stuck = pod(spec2, given, conditions=INFEASIBLE, name="stuck")
    pods = [plain, grown, plain, waiting, stuck, waiting]
    items = list_decoder("Pod").decode(json.dumps({"kind": "PodList", "items": pods}))["items"]
    for source in (items, pods):
        reader = ObjectReader()
        read: list[Pod] = [reader.pod(raw) for raw in source]
        assert [p.requests.cpu for p in read] == [100, 1000, 100, 2000, 500, 2000]
        assert read[0].scheduling is read[1].scheduling  # the spec is still shared


@pytest.mark.parametrize("where", ["containerStatuses", "initContainerStatuses"])
def test_container_statuses_are_pruned_by_the_live_decoder(where: str) -> None:
    """Only a status's name and resources survive the pruned decoding; state, image and IDs are
    skipped (150k pods a listing)."""
    raw = pod({"containers": [c("a", "100m")]})
    raw["status"][where] = [status_of("a", allocated={"cpu": "1"}, actuated={"cpu": "1"})]
    [listed] = list_decoder("Pod").decode(json.dumps({"kind": "PodList", "items": [raw]}))["items"]
    [kept] = listed["status"][where]
    assert set(kept) == {"name", "allocatedResources", "resources"}


def test_a_status_that_changes_nothing_shares_the_specs_requests() -> None:
    """A 1.33+ kubelet reports resources for every running container; where they equal the spec,
    the running pod shares its pending sibling's Resources (the planner's caches go by identity)."""
    spec = {"containers": [c("a", "100m", "64Mi")]}
    running = pod(
        spec, [status_of("a", allocated={"cpu": "100m", "memory": "64Mi"}, actuated={"cpu": "100m"})]
    )
    waiting = pod(spec, name="waiting")
    reader = ObjectReader()
    assert reader.pod(running).requests is reader.pod(waiting).requests
