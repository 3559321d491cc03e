def test_proposal_wait_is_shown_in_days_hours_and_minutes() -> None:
    from reconciler.views.status import format_age

    assert [format_age(s) for s in (-5, 59, 61, 3600 + 120, 86400 * 2 + 3 * 3600 + 59)] == [
        "0m",
        "0m",
        "1m",
        "1h02m",
        "2d3h",
    ]
