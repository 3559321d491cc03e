from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.config.documents import parse_yaml
from reconciler.config.settings import Config, config_from_document, load_config
from reconciler.domain.errors import UserError


def load_text(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_text(text)
    return load_config(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as info:
        load_text(tmp_path, text)
    return str(info.value)


def test_minimal_config_gets_every_default(tmp_path: Path) -> None:
    config = load_text(tmp_path, "cluster: prod-eks\n")
    assert config.cluster == "prod-eks"
    assert config.expander == ("least-waste",)
    assert config.scale_up.max_step == 20
    assert config.scale_up.max_node_provision_time == timedelta(minutes=15)
    assert config.scale_down.utilization_threshold == 0.5
    assert config.scale_down.unneeded_time == timedelta(minutes=10)
    assert config.scale_down.proposal_ttl == timedelta(hours=24)
    assert config.limits.cores_max == 320000
    assert config.git.branch == "main"
    assert config.manifest_path == "capacity/prod-eks.yaml"
    assert config.forge.type == "none"
    assert config.approval.mode == "signed"
    assert config.apply.drift == "warn"
    assert config.run.stages == ("plan",)
    assert config.node_templates.max_pods is None
    assert config.node_templates.eviction_hard_memory == 100 * 2**20


def test_full_design_example_loads() -> None:
    example = Path(__file__).parents[2] / "examples" / "asg-reconciler.yaml"
    config = load_config(example)
    assert config.cluster == "prod-eks"
    assert config.node_groups.explicit == ("0:6:my-asg",)


def test_bad_duration_names_file_line_key_and_fix(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cluster: c\nscaleDown:\n  unneededTime: 10 minutes\n")
    assert message.endswith(
        'asg-reconciler.yaml:3: scaleDown.unneededTime: "10 minutes" is not a duration (use 10m)'
    )


def test_unknown_key_lists_known_ones(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cluster: c\nscaleUp:\n  maxSteps: 3\n")
    assert "scaleUp: unknown key 'maxSteps'" in message
    assert "maxStep" in message


def test_missing_cluster(tmp_path: Path) -> None:
    assert "'cluster' is a required property" in error_of(tmp_path, "region: us-east-1\n")


def test_bad_enum_and_range(tmp_path: Path) -> None:
    assert "apply.drift" in error_of(tmp_path, "cluster: c\napply: {drift: fight}\n")
    assert "scaleDown.utilizationThreshold: 1.5 is out of range" in error_of(
        tmp_path, "cluster: c\nscaleDown: {utilizationThreshold: 1.5}\n"
    )


def test_bad_node_group_specs(tmp_path: Path) -> None:
    assert "min:max:asg-name" in error_of(tmp_path, "cluster: c\nnodeGroups: {explicit: ['6:my-asg']}\n")
    assert "min 5 above max 2" in error_of(tmp_path, "cluster: c\nnodeGroups: {explicit: ['5:2:a']}\n")
    assert "asg:tag=" in error_of(tmp_path, "cluster: c\nnodeGroups: {autoDiscovery: ['tag=x']}\n")


def test_bad_yaml_is_one_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cluster: [unclosed\n")
    assert "not valid YAML" in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_priority_expander_needs_priorities() -> None:
    document = parse_yaml("cluster: c\nexpander: priority,least-waste\n", "x.yaml")
    with pytest.raises(UserError, match=r"expanderOptions\.priorities"):
        config_from_document(document, "x.yaml")
    document = parse_yaml(
        "cluster: c\nexpander: priority,least-waste\n"
        "expanderOptions:\n  priorities: {'10': ['.*'], '50': [spot]}\n",
        "x.yaml",
    )
    config = config_from_document(document, "x.yaml")
    assert config.expander_options.priorities == ((50, ("spot",)), (10, (".*",)))


def test_a_priority_that_is_not_a_regex_is_one_line_naming_it(tmp_path: Path) -> None:
    """A glob where cluster-autoscaler takes a regex ("*spot*") was a re.error traceback from the
    planner, exit 1, after `validate` had said the file was valid (found by a new user's trial)."""
    message = error_of(
        tmp_path,
        "cluster: c\nexpander: priority\nexpanderOptions:\n  priorities:\n    '50': ['*spot*']\n"
        "    '10': ['.*']\n",
    )
    assert "asg-reconciler.yaml:5: " in message
    assert "expanderOptions.priorities.50: '*spot*' is not a regular expression" in message
    assert ".*spot.*" in message  # the fix


def test_custom_reservations(tmp_path: Path) -> None:
    config = load_text(
        tmp_path, "cluster: c\nnodeTemplates: {reservedCPU: 100m, reservedMemory: 512Mi, maxPods: 110}\n"
    )
    assert config.node_templates.reserved_cpu_milli == 100
    assert config.node_templates.reserved_memory == 512 * 2**20
    assert config.node_templates.max_pods == 110


def test_review_approvals_need_a_forge(tmp_path: Path) -> None:
    assert "forge.type github" in error_of(tmp_path, "cluster: c\napproval: {mode: github-reviews}\n")


def test_unknown_key_points_at_its_own_line_with_a_guess(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cluster: c\nscaleDown:\n  enabled: true\n  utilisationThreshold: 0.5\n")
    expected = "unknown key 'utilisationThreshold' (did you mean utilizationThreshold?)"
    assert message.endswith(f"asg-reconciler.yaml:4: scaleDown: {expected}")


def test_binary_config_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "asg-reconciler.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match=r":1: not UTF-8 text \(byte 0xff in column 1\)"):
        load_config(path)


def test_a_boolean_written_as_a_word_says_how_to_write_it(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cluster: c\napply: {allowAZRebalance: 'yes'}\n")
    assert "apply.allowAZRebalance" in message and "(use true or false)" in message


def test_leader_election_timing_follows_client_go_rules(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("cluster: c\nrun: {leaseDuration: 10s, renewDeadline: 10s, retryPeriod: 2s}\n")
    with pytest.raises(UserError, match=r"run.renewDeadline: needs leaseDuration > renewDeadline"):
        load_config(path)
    path.write_text("cluster: c\nrun: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 5s}\n")
    run = load_config(path).run
    assert (run.lease_duration.seconds, run.renew_deadline.seconds, run.retry_period.seconds) == (30, 20, 5)
    assert load_config(path).kubernetes.request_timeout.seconds == 30


def test_pending_pod_batches_default_to_karpenters_and_stay_open_at_least_the_idle_period(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("cluster: c\n")
    run = load_config(path).run
    batches = (run.debounce, run.batch_max_duration, run.batch_min_interval)
    assert tuple(d.seconds for d in batches) == (1, 10, 5)
    path.write_text("cluster: c\nrun: {debounce: 2s, batchMaxDuration: 1s}\n")
    with pytest.raises(UserError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: run.batchMaxDuration: must be at least run.debounce, the idle period that closes a "
        "batch (got 1s and 2s; Karpenter's defaults are 10s and 1s)"
    )
    path.write_text("cluster: c\nrun: {debounce: 0s, batchMaxDuration: 0s, batchMinInterval: 0s}\n")
    assert load_config(path).run.batch_min_interval.total_seconds() == 0  # no batching: allowed
    message = error_of(tmp_path, "cluster: c\nrun: {batchMinInterval: soon}\n")
    assert "run.batchMinInterval" in message


def test_a_duration_too_long_for_timedelta_is_one_line(tmp_path: Path) -> None:
    """The schema's pattern admits any number of hours; timedelta does not (found by the review)."""
    path = tmp_path / "c.yaml"
    path.write_text("cluster: x\nscaleDown:\n  unneededTime: 99999999999999h\n")
    with pytest.raises(UserError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: '99999999999999h' is too long a duration (use a realistic value such as 10m or 24h)"
    )
