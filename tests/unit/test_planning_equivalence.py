"""Equivalence classes: same owner, requests, scheduling, labels and claims -> one class."""

from __future__ import annotations

from reconciler.domain.model import Scheduling, Toleration, Volumes
from reconciler.planning.equivalence import Classifier, group_pods
from tests.support.planning_factories import pod


def test_pods_of_one_controller_form_one_class() -> None:
    pods = [pod(f"web-{i}", owner="web") for i in range(5)]
    classes = group_pods(pods)
    assert len(classes) == 1
    assert classes[0].pods == tuple(pods)
    assert classes[0].representative is pods[0]
    assert len(classes[0]) == 5


def test_equal_values_in_distinct_objects_still_group() -> None:
    a = pod("a", owner="web", scheduling=Scheduling(tolerations=(Toleration("x", "Exists"),)))
    b = pod("b", owner="web", scheduling=Scheduling(tolerations=(Toleration("x", "Exists"),)))
    assert a.scheduling is not b.scheduling
    assert len(group_pods([a, b])) == 1


def test_each_relevant_difference_splits_classes() -> None:
    base = pod("a", owner="web")
    variants = [
        pod("b", owner="api"),
        pod("c", owner="web", cpu=200),
        pod("d", owner="web", scheduling=Scheduling(node_selector=(("pool", "x"),))),
        pod("e", owner="web", labels={"app": "web", "extra": "1"}),
        pod("f", owner="web", namespace="prod"),
        pod("g", owner="web", volumes=Volumes(pvc_claims=("data",))),
    ]
    classes = group_pods([base, *variants])
    assert len(classes) == 7
    assert [c.representative.name for c in classes] == ["a", "b", "c", "d", "e", "f", "g"]


def test_local_storage_does_not_split() -> None:
    a = pod("a", owner="web", volumes=Volumes(local_storage=("tmp",)))
    assert len(group_pods([a, pod("b", owner="web")])) == 1


def test_classifier_keys_are_stable() -> None:
    classifier = Classifier()
    a, b = pod("a", owner="web"), pod("b", owner="web")
    assert classifier.key(a) == classifier.key(b) == classifier.key(a)
    assert classifier.key(pod("c", owner="db")) != classifier.key(a)
