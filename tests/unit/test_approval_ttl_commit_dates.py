"""The TTL is measured from the approving commit's committer date, which whoever makes that commit
chooses: a date years ahead would never age past scaleDown.proposalTTL, so a commit dated more than
a few minutes ahead of apply's clock is refused. Found by the attack on issue 20/24 (with
github-reviews, a merge commit pushed with plain git carries any date)."""

from __future__ import annotations

from datetime import timedelta

from reconciler.apply.changes import Introduced
from reconciler.apply.effects import Effects
from reconciler.apply.inputs import ApplyInputs
from reconciler.apply.sync import apply
from reconciler.gitops.manifest import GroupEntry, Manifest, Removal
from tests.support.plan_world import NOW, make_config
from tests.support.windows_world import Cloud, world


def removal_with_commit_time(age: timedelta) -> list[str]:
    w = world(("general",))
    inventory = w.inventory()
    config = make_config()
    manifest = Manifest("test", (GroupEntry("general", 5, remove_instances=(Removal("i-n3"),)),))
    inputs = ApplyInputs(
        config=config,
        inventory=inventory,
        manifest=manifest,
        commit="b" * 40,
        introduced={("general", "i-n3"): Introduced("general", "i-n3", "a" * 40)},
        commit_time=lambda sha: NOW - age,
        now=NOW,
        dry_run=False,
    )
    cloud = Cloud()
    apply(inputs, Effects(cloud, cloud, cloud, observe=lambda: inventory, clock=lambda: NOW))
    return cloud.terminated


def test_an_approval_older_than_the_ttl_is_refused() -> None:
    assert removal_with_commit_time(timedelta(hours=1)) == ["i-n3"]
    assert removal_with_commit_time(timedelta(hours=25)) == []  # proposalTTL 24h


def test_an_approving_commit_dated_years_ahead_is_not_taken_as_fresh() -> None:
    assert removal_with_commit_time(-timedelta(days=3650)) == []


def test_a_commit_a_few_minutes_ahead_is_a_clock_difference() -> None:
    assert removal_with_commit_time(-timedelta(minutes=5)) == ["i-n3"]
