"""Equivalence classes: pods the predicates cannot tell apart, checked once per node shape.

Two pods are equivalent when every input of every predicate is the same: namespace, labels (they are
matched by anti-affinity and spread selectors), requests, the Scheduling object's values and the
claims they mount. The controller owner is part of the key too, so a class never mixes workloads in
reports. 2,000 pending pods from 50 controllers become 50 classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.domain.model import Pod, Resources, Scheduling

ClassKey = tuple[str, str, str, int, int, int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class EquivalenceClass:
    """Pods in first-seen order; `pods[0]` stands for all of them."""

    key: ClassKey
    pods: tuple[Pod, ...]

    @property
    def representative(self) -> Pod:
        return self.pods[0]

    @property
    def requests(self) -> Resources:
        return self.pods[0].requests

    def __len__(self) -> int:
        return len(self.pods)


class Classifier:
    """Computes class keys, stable for the classifier's lifetime (placement cursors rely on that).

    Readers share one Scheduling, labels and requests instance per controller, so each distinct
    object is hashed by value once and then found by identity. The memo holds the object itself, so
    an id is never reused while it is in the memo.
    """

    __slots__ = ("_by_id", "_by_value")

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[object, int]] = {}
        self._by_value: dict[object, int] = {}

    def _intern(self, obj: object, value: object) -> int:
        number = self._by_value.get(value)
        if number is None:
            number = self._by_value[value] = len(self._by_value)
        self._by_id[id(obj)] = (obj, number)
        return number

    def _scheduling(self, s: Scheduling) -> int:
        hit = self._by_id.get(id(s))
        return hit[1] if hit is not None and hit[0] is s else self._intern(s, ("s", s))

    def _labels(self, labels: Mapping[str, str]) -> int:
        hit = self._by_id.get(id(labels))
        if hit is not None and hit[0] is labels:
            return hit[1]
        return self._intern(labels, ("l", frozenset(labels.items())))

    def _requests(self, r: Resources) -> int:
        hit = self._by_id.get(id(r))
        return hit[1] if hit is not None and hit[0] is r else self._intern(r, ("r", r))

    def key(self, pod: Pod) -> ClassKey:
        owner = pod.owner
        return (
            pod.namespace,
            owner.kind if owner is not None else "",
            owner.name if owner is not None else "",
            self._requests(pod.requests),
            self._scheduling(pod.scheduling),
            self._labels(pod.labels),
            pod.volumes.pvc_claims,
        )


def group_pods(pods: Iterable[Pod], classifier: Classifier | None = None) -> list[EquivalenceClass]:
    """Classes in the order their first pod appears (so results are reproducible from input order).

    Keys are numbered by the classifier, so keys from different classifiers are not comparable:
    use one Classifier per plan (e.g. `NodePool.classifier`) when keys are kept across calls, as
    `estimate(fit_memo=...)` does."""
    classifier = classifier or Classifier()
    groups: dict[ClassKey, list[Pod]] = {}
    for pod in pods:
        groups.setdefault(classifier.key(pod), []).append(pod)
    return [EquivalenceClass(key, tuple(members)) for key, members in groups.items()]
