"""The kill switch's ConfigMap, read pure (issue 24 item 7, issue 19 ConfigMap keys).

A switch typed by hand in an incident must fail safe: any value but absent, empty or "false" is on;
a key that differs from ours only in case counts (and is named in a warning); a key or group we do
not know is a warning naming it. Every legal ASG name gets a key a real API server accepts
(`[-._a-zA-Z0-9]+`, at most 253 characters), and reading accepts every form."""

from __future__ import annotations

import re

import pytest

from reconciler.kube.control import SuspendedError, control_from_data, group_keys, keys_naming, switch_key

SOURCE = "configmap kube-system/asg-reconciler-control"
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


@pytest.mark.parametrize("value", ["true", "TRUE", " True ", "yes", "1", "on", "y", "no", "0", "off", "x"])
def test_any_value_but_absent_empty_or_false_is_on(value: str) -> None:
    control = control_from_data({"suspend": value, "suspend.general": value}, SOURCE)
    assert control.cluster is not None
    assert control.group("general") is not None
    with pytest.raises(SuspendedError):
        control.refuse_if_suspended()


@pytest.mark.parametrize("value", ["", "  ", "false", "FALSE", " False\n"])
def test_absent_empty_or_false_is_off(value: str) -> None:
    control = control_from_data({"suspend": value, "suspend.general": value}, SOURCE)
    assert control.cluster is None and control.group("general") is None
    control.refuse_if_suspended("general")
    assert control.warnings(["general"]) == []


@pytest.mark.parametrize("value", ["yes", "1", "on", "no", "off"])
def test_a_value_other_than_true_or_false_is_named_in_a_warning(value: str) -> None:
    warnings = control_from_data({"suspend.general": value}, SOURCE).warnings(["general"])
    assert len(warnings) == 1
    assert "suspend.general" in warnings[0] and repr(value) in warnings[0] and "on" in warnings[0]


def test_true_and_false_need_no_warning() -> None:
    data = {"suspend": "false", "suspend.general": "true", "reason.general": "incident", "by.general": "me"}
    assert control_from_data(data, SOURCE).warnings(["general"]) == []


@pytest.mark.parametrize("key", ["Suspend", "SUSPEND", "sUsPeNd"])
def test_suspend_in_another_case_is_on_and_named(key: str) -> None:
    control = control_from_data({key: "true", "Reason": "incident 7"}, SOURCE)
    assert control.cluster is not None and control.cluster.reason == "incident 7"
    warnings = control.warnings([])
    assert any(key in w and '"suspend"' in w for w in warnings), warnings


def test_a_group_key_in_another_case_suspends_the_group_and_is_named() -> None:
    control = control_from_data({"suspend.General": "true", "reason.General": "hands off"}, SOURCE)
    assert control.suspended_groups(["general", "batch"]) == {"general": control.group("general")}
    with pytest.raises(SuspendedError, match="hands off"):
        control.refuse_if_suspended("general")
    control.refuse_if_suspended("batch")
    (warning,) = control.warnings(["general", "batch"])
    assert "suspend.General" in warning and "general" in warning


def test_the_key_word_in_another_case_counts_too() -> None:
    control = control_from_data({"Suspend.general": "true"}, SOURCE)
    assert control.group("general") is not None
    assert any("Suspend.general" in w for w in control.warnings(["general"]))


@pytest.mark.parametrize("key", ["suspnd", "suspended", "Suspend-all", "pause", "suspend-escaped"])
def test_an_unknown_key_is_a_warning_that_names_it(key: str) -> None:
    control = control_from_data({key: "true"}, SOURCE)
    assert control.cluster is None
    warnings = control.warnings(["general"])
    assert any(f'"{key}"' in w and "unknown key" in w for w in warnings), warnings


def test_a_key_for_an_unknown_group_is_a_warning_that_names_it() -> None:
    control = control_from_data({"suspend.genral": "true"}, SOURCE)
    assert control.suspended_groups(["general"]) == {}
    (warning,) = control.warnings(["general"])
    assert "suspend.genral" in warning and "genral" in warning and "no node group" in warning


def test_status_lines_say_which_key_to_remove() -> None:
    control = control_from_data({switch_key("suspend", "team a/web"): "true", "reason.general": "x"}, SOURCE)
    (line,) = control.lines()
    assert "team a/web" in line and "suspend-escaped.team_20a_2Fweb" in line


# --------------------------------------------------------------------------- keys for any ASG name


NAMES = [
    "general",
    "web.prod-1",
    "eks_nodes",
    "General",
    "team a/web",
    "a:b",  # AWS says no colon; the API pattern allows it: encoded like anything else
    "spaces  and\ttabs",
    "Ärger/日本",
    "_20",  # looks like an escape
    "x" * 245,  # the longest name kept as it is ("suspend." + 245 = 253)
    "x" * 246,
    "x" * 255,
    "/" * 255,
    "日本" * 127,
]


@pytest.mark.parametrize("name", NAMES)
def test_every_name_gets_keys_a_real_server_accepts_and_reads_back(name: str) -> None:
    data = {}
    for word, key in group_keys(name).items():
        assert CONFIG_KEY.fullmatch(key) and len(key) <= 253 and not key.startswith(".."), key
        data[key] = "true" if word == "suspend" else name if word == "name" else f"{word} of it"
    control = control_from_data(data, SOURCE)
    found = control.group(name)
    assert found is not None and found.reason == "reason of it" and found.by == "by of it"
    assert control.suspended_groups([name, "other"]) == {name: found}
    assert control.warnings([name]) == []
    assert control.group("other") is None
    assert keys_naming(data, name) == sorted(data)  # what resume removes
    assert keys_naming(data, "other") == [] and keys_naming(data, None) == []


def test_a_name_that_is_already_a_key_stays_as_it_is() -> None:
    assert switch_key("suspend", "x" * 245) == "suspend." + "x" * 245
    assert switch_key("suspend", "x" * 246).startswith("suspend-sha256.")  # too long even escaped
    assert switch_key("suspend", "x:" * 50) == "suspend-escaped." + "x_3A" * 50
    assert switch_key("suspend", "general") == "suspend.general"
    assert switch_key("reason", "web.prod-1") == "reason.web.prod-1"
    assert switch_key("suspend", "eks_nodes") == "suspend.eks_nodes"
    assert switch_key("suspend", None) == "suspend"


def test_other_names_are_escaped_byte_by_byte() -> None:
    assert switch_key("suspend", "team a/web") == "suspend-escaped.team_20a_2Fweb"
    assert switch_key("at", "a_b c") == "at-escaped.a_5Fb_20c"
    assert switch_key("suspend", "Ä") == "suspend-escaped._C3_84"


def test_a_name_too_long_to_escape_is_hashed() -> None:
    name = "/" * 255
    key = switch_key("suspend", name)
    assert re.fullmatch(r"suspend-sha256\.[0-9a-f]{64}", key)


def test_an_escaped_key_typed_by_hand_in_lower_case_hex_reads_the_same() -> None:
    control = control_from_data({"suspend-escaped.team_20a_2fweb": "yes"}, SOURCE)
    assert control.group("team a/web") is not None


def test_a_broken_escape_still_suspends_what_it_can_and_says_so() -> None:
    control = control_from_data({"suspend-escaped.team_2": "true"}, SOURCE)
    assert any("suspend-escaped.team_2" in w for w in control.warnings(["team a/web"]))
