"""The kill switch as people really type it (issue 24 item 7) and for any legal ASG name (issue 19):
through the CLI, against moto, a bare repository and the fake API, which refuses a ConfigMap key a
real server refuses (422)."""

from __future__ import annotations

import pytest

from reconciler.config.settings import load_config
from reconciler.kube.client import api_client
from reconciler.kube.control import SuspendedError, Switch
from tests.support.apply_world import MAIN_PATH, TAGS, World, approved, manifest_on_main, untouched
from tests.support.git import BOB, needs_ssh_keygen

pytestmark = needs_ssh_keygen

CONTROL = "asg-reconciler-control"
TEAM = "team a/web"  # a legal ASG name (the API allows any character but a colon)


def pull(world: World, data: dict[str, str]) -> None:
    """The switch as a person wrote it with `kubectl edit`."""
    world.kube.put(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONTROL, "namespace": "kube-system"}}
        | {"data": data}
    )


def control_data(world: World) -> dict[str, str]:
    found = world.kube.get_object("ConfigMap", "kube-system", CONTROL)
    assert found is not None
    return dict(found.get("data") or {})


@pytest.mark.parametrize(
    "data",
    [
        {"suspend": "yes"},
        {"suspend": "1"},
        {"suspend": "on"},
        {"suspend": "y"},
        {"suspend": "no"},
        {"Suspend": "true"},
        {"suspend.General": "true", "reason.General": "hands off"},
    ],
    ids=["yes", "1", "on", "y", "no", "Suspend", "suspend.General"],
)
def test_a_switch_typed_by_hand_stops_apply(
    world: World, capsys: pytest.CaptureFixture[str], data: dict[str, str]
) -> None:
    approved(world, capsys)
    pull(world, data)
    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    untouched(world)
    said = refused.out + refused.err
    assert "suspended" in said
    typed = next(iter(data))
    if typed not in ("suspend",):
        assert typed in said, said  # the key as typed is named, so a person can correct it
    value = data[typed]
    if value not in ("true", "false"):  # "no" stops apply too: the refusal says how it was read
        assert f"{value!r} is read as on" in said, said


def test_an_unknown_key_or_group_is_named_by_apply_and_status(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.cli(capsys, "plan").code == 0
    pull(world, {"suspnd": "true", "suspend.genral": "true"})
    status = world.cli(capsys, "status")
    assert status.code == 0, status.err
    assert "suspnd" in status.out and "unknown key" in status.out
    assert "suspend.genral" in status.out and "names no node group" in status.out
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert "suspnd" in applied.out and "suspend.genral" in applied.out


@pytest.mark.parametrize(
    ("name", "key"),
    [("team/web", "suspend-escaped.team_2Fweb"), ("web@prod+1", "suspend-escaped.web_40prod_2B1")],
)
def test_apply_refuses_a_group_whose_name_is_no_configmap_key(
    world: World, capsys: pytest.CaptureFixture[str], name: str, key: str
) -> None:
    """Names the manifest holds but a ConfigMap key may not (`/`, `@`, `+`): suspended through
    the CLI, the group is left alone by apply until resumed."""
    world.aws.asg(name, min_size=0, max_size=3, desired=0, tags=TAGS, launch_template="lt")
    assert world.cli(capsys, "plan").code == 0
    BOB.commit(world.remote, "main", {MAIN_PATH: _raise_desired(manifest_on_main(world), name)}, "scale up")

    pulled = world.cli(capsys, "suspend", "--node-group", name, "--reason", "incident 9")
    assert pulled.code == 0, pulled.out + pulled.err  # a real server refuses `suspend.team/web` (422)
    assert control_data(world)[key] == "true"
    assert key in pulled.out  # the key, for whoever edits the ConfigMap by hand

    refused = world.cli(capsys, "apply")
    assert refused.code == 3, refused.out + refused.err
    assert f"{name} is suspended" in refused.out and "incident 9" in refused.out
    assert _desired(world, name) == 0
    status = world.cli(capsys, "status")
    assert status.code == 0 and key in status.out and "incident 9" in status.out

    resumed = world.cli(capsys, "resume", "--node-group", name)
    assert resumed.code == 0, resumed.out + resumed.err
    assert key not in control_data(world)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert _desired(world, name) == 1


def test_a_group_named_with_a_space_and_a_slash_is_suspended_and_resumed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """`team a/web`: the ASG API's name pattern allows a space. The switch as apply reads it before
    every change of that group refuses it; `status` shows it with the key to remove by hand."""
    world.aws.asg(TEAM, min_size=0, max_size=3, desired=0, tags=TAGS, launch_template="lt")
    pulled = world.cli(capsys, "suspend", "--node-group", TEAM, "--reason", "incident 9")
    assert pulled.code == 0, pulled.out + pulled.err  # `suspend.team a/web`: 422 from a real server
    assert control_data(world) == {
        "suspend-escaped.team_20a_2Fweb": "true",
        "reason-escaped.team_20a_2Fweb": "incident 9",
        "by-escaped.team_20a_2Fweb": "alice@example.com",
        "at-escaped.team_20a_2Fweb": control_data(world)["at-escaped.team_20a_2Fweb"],
    }
    status = world.cli(capsys, "status")
    assert status.code == 0, status.err
    assert f"node group {TEAM} is suspended by alice@example.com" in status.out
    # the manifest cannot carry a space, so discovery leaves the group out of plans and apply (one
    # warning); the switch still reads and writes its escaped key for whoever pulls it anyway
    switch = Switch(load_config(world.config), api_client(load_config(world.config).kubernetes))
    with pytest.raises(SuspendedError, match="incident 9"):
        switch.read().refuse_if_suspended(TEAM)
    switch.read().refuse_if_suspended("general")

    resumed = world.cli(capsys, "resume", "--node-group", TEAM)
    assert resumed.code == 0, resumed.out + resumed.err
    assert control_data(world) == {}
    switch.read().refuse_if_suspended(TEAM)


def test_resume_lifts_a_switch_typed_in_another_case(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    pull(world, {"Suspend": "yes", "suspend.General": "true", "note": "kept"})
    assert world.cli(capsys, "resume", "--node-group", "general").code == 0
    assert "suspend.General" not in control_data(world)
    assert world.cli(capsys, "resume").code == 0
    assert control_data(world) == {"note": "kept"}


def _desired(world: World, name: str) -> int:
    groups = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])


def _raise_desired(text: str, name: str) -> str:
    """The manifest with `name`'s desired raised from 0 to 1 (a scale-up: no approval needed)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if name in line)
    at = next(i for i in range(start, len(lines)) if lines[i].strip() == "desired: 0")
    lines[at] = lines[at].replace("desired: 0", "desired: 1")
    return "".join(lines)


def test_suspending_a_group_that_does_not_exist_is_refused_before_anything_is_written(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo would suspend nothing while the person believes the group stopped: exit 2 naming the
    groups there are, nothing written; --force writes it for a group not created yet."""
    typo = world.cli(capsys, "suspend", "--node-group", "genral", "--reason", "incident 9")
    assert typo.code == 2, typo.out + typo.err
    assert "--node-group genral" in typo.err and "general" in typo.err and "--force" in typo.err
    assert "Traceback" not in typo.err
    assert world.kube.get_object("ConfigMap", "kube-system", CONTROL) is None

    forced = world.cli(capsys, "suspend", "--node-group", "genral", "--force")
    assert forced.code == 0, forced.out + forced.err
    assert control_data(world)["suspend.genral"] == "true"

    pulled = world.cli(capsys, "suspend", "--node-group", "GENERAL")  # names compare ignoring case
    assert pulled.code == 0, pulled.out + pulled.err
    assert "asg-reconciler resume --node-group GENERAL" in pulled.out
