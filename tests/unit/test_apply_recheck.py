"""Rule 5: an approved removal is judged again on live state before apply drains it."""

from __future__ import annotations

from reconciler.apply.recheck import recheck
from reconciler.domain.model import SAFE_TO_EVICT, SCALE_DOWN_DISABLED
from reconciler.planning.types import CommittedGroup, PlanInputs
from tests.support.plan_world import NOW, World, make_config

APPROVED = {"general": {"i-n3"}}
COMMITTED = {"general": CommittedGroup(desired=2, remove_instances=("i-n3",))}


def world(**n3: object) -> World:
    """n1 and n2 have room; n3 (approved for removal) runs one small pod."""
    w = World().group("general", min_size=1)
    w.node("general", "n1").running("n1", "web-1", cpu=1000)
    w.node("general", "n2").running("n2", "web-2", cpu=1000)
    w.node("general", "n3", **n3).running("n3", "web-3", cpu=300)  # type: ignore[arg-type]
    return w


def check(w: World, committed: dict[str, CommittedGroup] = COMMITTED) -> dict[str, str | None]:
    inputs = PlanInputs(inventory=w.inventory(), config=make_config(), now=NOW, committed=committed)
    return recheck(inputs, APPROVED)


def test_still_safe_passes_without_waiting_for_unneeded_time() -> None:
    assert check(world()) == {"i-n3": None}


def test_a_pod_that_now_forbids_the_drain_refuses_it() -> None:
    w = world()
    w.running("n3", "pinned", cpu=100, annotations={SAFE_TO_EVICT: "false"})
    assert check(w) == {"i-n3": "pod default/pinned is annotated safe-to-evict: false"}


def test_the_node_is_busy_again() -> None:
    w = world()
    w.running("n3", "big", cpu=2500)
    assert check(w)["i-n3"] == "busy again: above its scale-down utilisation threshold"


def test_annotation_added_after_approval() -> None:
    reason = check(world(annotations={SCALE_DOWN_DISABLED: "true"}))["i-n3"]
    assert reason == "scale-down disabled by annotation"


def test_pending_pods_need_the_room() -> None:
    w = world()
    w.pending("job-1", cpu=2900)
    w.pending("job-2", cpu=2900)
    w.pending("job-3", cpu=3600)  # n1 and n2 take two; the third lands on n3
    assert check(w)["i-n3"] == "busy again: above its scale-down utilisation threshold"


def test_held_group() -> None:
    held = {"general": CommittedGroup(desired=2, remove_instances=("i-n3",), hold=True)}
    assert check(world(), held) == {"i-n3": "the group is on hold in the manifest"}
