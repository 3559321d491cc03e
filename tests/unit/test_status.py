def test_proposal_wait_is_shown_in_days_hours_and_minutes() -> None:
    from reconciler.views.status import format_age

    assert [format_age(s) for s in (-5, 59, 61, 3600 + 120, 86400 * 2 + 3 * 3600 + 59)] == [
        "0m",
        "0m",
        "1m",
        "1h02m",
        "2d3h",
    ]


def test_a_mixed_group_shows_the_spread_of_types_it_really_runs() -> None:
    """Issue 29 item 3: the template is one (the least) type; status says what AWS launched."""
    from reconciler.domain.inventory import build_inventory
    from reconciler.domain.model import ClusterState, Instance, NodeGroup
    from reconciler.views.status import build_status, group_document, render_status_table

    def instance(iid: str, instance_type: str, state: str = "InService") -> Instance:
        return Instance(iid, state, "us-east-1a", instance_type, None)

    group = NodeGroup(
        name="mixed",
        min_size=0,
        max_size=10,
        desired=3,
        instances=(
            instance("i-1", "m5.large"),
            instance("i-2", "m5.large"),
            instance("i-3", "c5.large"),
            instance("i-4", "c5.large", "Terminating"),
        ),
        zones=("us-east-1a",),
        tags={},
        instance_types=("c5.large", "m5.large"),
    )
    report = build_status("prod", build_inventory(ClusterState(nodes=(), pods=()), (group,)))
    (status,) = report.groups
    assert group_document(status)["runningInstanceTypes"] == {"c5.large": 1, "m5.large": 2}
    assert "(runs 1 c5.large, 2 m5.large)" in render_status_table(report)
