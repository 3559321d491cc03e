"""`history --report` reads a real capacity repository: every manifest of the folder, the same
`git log` as `history` (trailers, merges, apply's notes), holds set by hand, open proposals (issue 23)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.gitops.fleet_history import build_fleet, read_fleet
from reconciler.gitops.history import KIND_HOLD, KIND_OPEN, KIND_RELEASE, history_command
from reconciler.gitops.record_reading import history_entries
from reconciler.gitops.records import NOTES_REF, ApplyRecord, GroupRecord, encode_note
from reconciler.gitops.trailers import CapacityMessage, Change, InstanceRemoval, Reason, build_message
from tests.support.git import ALICE, BOB, BOT, git, init_bare

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def manifest(cluster: str, groups: dict[str, tuple[int, bool, tuple[str, ...]]]) -> str:
    lines = [f"version: 1\ncluster: {cluster}\nnodeGroups:"]
    for name, (desired, hold, removals) in groups.items():
        lines.append(f"  {name}:\n    removeInstances: [{', '.join(removals)}]")
        lines.append(
            f"    hold: {str(hold).lower()}\n    desired: {desired}\n    minSize: 0\n    maxSize: 50"
        )
    return "\n".join(lines) + "\n"


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def build(repo: Path) -> dict[str, str]:
    """Two clusters in capacity/, a merged proposal, a hold set and lifted by hand, an open
    proposal, a state branch, apply's notes, a broken manifest and a file that is no manifest."""
    prod = {"general": (2, False, ()), "gpu": (1, False, ())}
    up = CapacityMessage(
        "prod", "scale up general 2 -> 4", (Change("general", 2, 4),), (Reason("general", "3 pending pods"),)
    )
    prod["general"] = (4, False, ())
    shas = {
        "up": BOT.commit(
            repo,
            "main",
            {"capacity/prod.yaml": manifest("prod", prod), "README.md": "hi\n"},
            build_message(up),
            when=at(0),
        )
    }
    stg = CapacityMessage(
        "staging", "scale up stg-a 0 -> 2", (Change("stg-a", 0, 2),), (Reason("stg-a", "2 pending pods"),)
    )
    shas["staging"] = BOT.commit(
        repo,
        "main",
        {"capacity/staging.yaml": manifest("staging", {"stg-a": (2, False, ())})},
        build_message(stg),
        when=at(1),
    )
    # a proposal, merged by Alice three hours after the bot opened it
    down = CapacityMessage(
        "prod",
        "scale down general 4 -> 3",
        (Change("general", 4, 3),),
        (Reason("general", "idle"),),
        removals=(InstanceRemoval("general", "i-0aaaaaaaaaaaaaaaa"),),
        proposal="asg-reconciler/prod/scale-down",
    )
    git("branch", "asg-reconciler/prod/scale-down", "main", cwd=repo)
    prod["general"] = (4, False, ("i-0aaaaaaaaaaaaaaaa",))
    shas["proposal"] = BOT.commit(
        repo,
        "asg-reconciler/prod/scale-down",
        {"capacity/prod.yaml": manifest("prod", prod)},
        build_message(down),
        when=at(2),
    )
    shas["merge"] = ALICE.merge(
        repo,
        "main",
        "asg-reconciler/prod/scale-down",
        "Merge pull request #7 from org/asg-reconciler/prod/scale-down",
        when=at(5),
    )
    git("branch", "-D", "asg-reconciler/prod/scale-down", cwd=repo)
    # Bob holds gpu by hand (no trailers), later lifts it; adding a group at hold: false is no hold
    prod["gpu"] = (1, True, ())
    shas["hold"] = BOB.commit(
        repo,
        "main",
        {"capacity/prod.yaml": manifest("prod", prod)},
        "Hold gpu during the rollout\n",
        when=at(6),
    )
    stg_groups = {"stg-a": (2, False, ()), "stg-b": (1, False, ())}
    BOB.commit(
        repo, "main", {"capacity/staging.yaml": manifest("staging", stg_groups)}, "Track stg-b\n", when=at(7)
    )
    prod["gpu"] = (1, False, ())
    shas["release"] = BOB.commit(
        repo, "main", {"capacity/prod.yaml": manifest("prod", prod)}, "Release gpu\n", when=at(8)
    )
    prod["gpu"] = (1, True, ())
    shas["hold2"] = BOB.commit(
        repo, "main", {"capacity/prod.yaml": manifest("prod", prod)}, "Hold gpu again\n", when=at(9)
    )
    BOB.commit(
        repo,
        "main",
        {"capacity/broken.yaml": "cluster: [\n", "capacity/notes.txt": "not a manifest\n"},
        "wip\n",
        when=at(10),
    )
    # an open proposal, and the planner's state branch (neither is on main)
    git("branch", "asg-reconciler/staging/scale-down", "main", cwd=repo)
    open_down = CapacityMessage(
        "staging",
        "scale down stg-a 2 -> 1",
        (Change("stg-a", 2, 1),),
        (Reason("stg-a", "idle node"),),
        removals=(InstanceRemoval("stg-a", "i-0bbbbbbbbbbbbbbbb"),),
        proposal="asg-reconciler/staging/scale-down",
    )
    stg_groups["stg-a"] = (2, False, ("i-0bbbbbbbbbbbbbbbb",))
    shas["open"] = BOT.commit(
        repo,
        "asg-reconciler/staging/scale-down",
        {"capacity/staging.yaml": manifest("staging", stg_groups)},
        build_message(open_down),
        when=at(11),
    )
    BOT.commit(
        repo,
        "asg-reconciler/prod/state",
        {"state.json": "{}\n"},
        "state(prod): unneeded nodes 0\n",
        parents=[],
        when=at(11),
    )
    # apply's records on the first two commits and the merge
    for key, cluster, group, before, after, hours in (
        ("up", "prod", "general", 2, 4, 0.1),
        ("staging", "staging", "stg-a", 0, 2, 1.1),
        ("merge", "prod", "general", 4, 3, 5.2),
    ):
        action = "scale-up" if after > before else "scale-down"
        gone = ("i-0aaaaaaaaaaaaaaaa",) if action == "scale-down" else ()
        record = ApplyRecord(
            shas[key], at(hours), True, (GroupRecord(group, action, before, after, gone),), cluster=cluster
        )
        git("notes", "--ref", NOTES_REF, "add", "-m", encode_note([record]), shas[key], cwd=repo)
    return shas


def test_the_fleet_from_one_repository(tmp_path: Path) -> None:
    repo = init_bare(tmp_path / "capacity.git")
    shas = build(repo)
    source = read_fleet(repo, "main", "capacity", "refs/heads/", history_entries)
    # the same entries `history` gives (all clusters), plus holds and open proposals
    same = history_command(repo, None, ref="main", note_entries=history_entries)
    assert [e for e in source.entries if e.kind in ("change", "apply")] == same
    holds = [
        (e.kind, e.group, e.time, e.author, e.commit)
        for e in source.entries
        if e.kind in (KIND_HOLD, KIND_RELEASE)
    ]
    assert holds == [
        (KIND_HOLD, "gpu", at(9), BOB.name, shas["hold2"]),
        (KIND_RELEASE, "gpu", at(8), BOB.name, shas["release"]),
        (KIND_HOLD, "gpu", at(6), BOB.name, shas["hold"]),
    ]
    (opened,) = [e for e in source.entries if e.kind == KIND_OPEN]
    assert (
        opened.cluster,
        opened.group,
        opened.instances,
        opened.proposal,
        opened.commit,
        opened.opened,
    ) == (
        "staging",
        "stg-a",
        ("i-0bbbbbbbbbbbbbbbb",),
        "asg-reconciler/staging/scale-down",
        shas["open"],
        at(11),
    )
    merged = next(e for e in source.entries if e.kind == "change" and e.instances)
    assert (merged.time, merged.opened, merged.merged_by, merged.proposal) == (
        at(5),
        at(2),
        ALICE.name,
        "asg-reconciler/prod/scale-down",
    )
    assert [(m.path, m.manifest is not None) for m in source.manifests] == [
        ("capacity/broken.yaml", False),
        ("capacity/prod.yaml", True),
        ("capacity/staging.yaml", True),
    ]
    assert "capacity/broken.yaml" in source.manifests[0].problem

    model = build_fleet(source, now=at(12), folder="capacity")
    clusters = {c.name: c for c in model.clusters}
    assert set(clusters) == {"prod", "staging", "broken"}
    prod, staging = clusters["prod"], clusters["staging"]
    general = prod.groups[0]
    (track,) = general.proposals
    assert (track.opened, track.approved, track.approved_by, track.applied) == (
        at(2),
        at(5),
        ALICE.name,
        at(5.2),
    )
    gpu = prod.groups[1]
    assert [(s.start, s.end) for s in gpu.holds] == [(at(6), at(8)), (at(9), None)] and gpu.held
    assert [g.name for g in staging.groups] == ["stg-a", "stg-b"]
    assert [p.instances for p in staging.open_proposals] == [("i-0bbbbbbbbbbbbbbbb",)]


def test_a_manifest_the_schema_refuses_still_shows_its_groups(tmp_path: Path) -> None:
    """Written by hand with a mistake (an instance id EC2 never gives): the page names the problem
    and still charts the groups, read leniently."""
    repo = init_bare(tmp_path / "capacity.git")
    text = manifest("edge", {"edge-a": (3, True, ("i-abc",)), "edge-b": (1, False, ())})
    BOB.commit(repo, "main", {"capacity/edge.yaml": text}, "Add the edge cluster\n", when=T0)
    (found,) = read_fleet(repo, "main", "capacity", "refs/heads/", history_entries).manifests
    assert found.manifest is not None and "removeInstances" in found.problem
    model = build_fleet(read_fleet(repo, "main", "capacity", "refs/heads/", history_entries), now=at(1))
    (cluster,) = model.clusters
    assert (cluster.name, cluster.problem) == ("edge", found.problem)
    assert [(g.name, g.target, g.held) for g in cluster.groups] == [("edge-a", 2, True), ("edge-b", 1, False)]


def test_an_empty_repository_and_a_folder_at_the_root(tmp_path: Path) -> None:
    empty = init_bare(tmp_path / "empty.git")
    source = read_fleet(empty, "main", "capacity", "refs/heads/", history_entries)
    assert (source.entries, source.manifests) == ((), ())
    root = init_bare(tmp_path / "root.git")
    BOT.commit(root, "main", {"prod.yaml": manifest("prod", {"a": (1, True, ())})}, "add prod\n", when=T0)
    source = read_fleet(root, "main", "", "refs/heads/", history_entries)
    assert [m.path for m in source.manifests] == ["prod.yaml"]
    assert [(e.kind, e.group) for e in source.entries] == [(KIND_HOLD, "a")]  # a new group, held
