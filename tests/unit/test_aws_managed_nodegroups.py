"""What DescribeNodegroup says becomes the template's labels and taints (issue 29 item 2), never in
the unsafe direction: a taint the reader cannot place still keeps intolerant pods off the group, and
everything left out or changed is a warning naming it."""

from __future__ import annotations

from reconciler.aws.managed_nodegroups import from_description
from reconciler.domain.model import Taint


def test_a_taint_effect_spelled_the_kubernetes_way_is_read() -> None:
    read = from_description(
        {"nodegroupName": "gpu", "taints": [{"key": "gpu", "value": "1", "effect": "NoExecute"}]}
    )
    assert read.taints == (Taint("gpu", "1", "NoExecute"),)
    assert read.warnings == ()


def test_an_unknown_taint_effect_still_keeps_intolerant_pods_off_and_warns() -> None:
    read = from_description(
        {"nodegroupName": "gpu", "taints": [{"key": "gpu", "value": "1", "effect": "NO_WAY"}]}
    )
    # dropping it would plan pods onto nodes that will refuse them: NoSchedule is the safe reading
    assert read.taints == (Taint("gpu", "1", "NoSchedule"),)
    assert len(read.warnings) == 1 and "'NO_WAY'" in read.warnings[0] and "NoSchedule" in read.warnings[0]


def test_labels_no_node_could_carry_are_left_out_with_a_warning() -> None:
    read = from_description(
        {"nodegroupName": "gpu", "labels": {"ok": "yes", "bad key!": "x", "long": "v" * 64}}
    )
    assert read.labels["ok"] == "yes" and "bad key!" not in read.labels and "long" not in read.labels
    assert len(read.warnings) == 2, read.warnings
