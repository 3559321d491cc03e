"""A planted AWS facts cache must not decide the plan (issue 24 item 8).

The cache says what an instance type is; a plan for a group at zero believes it. A file another user
could have written — owned by someone else, group/world writable, in a folder others may write, or a
symlink — claiming m5.large has 64 vCPU would scale a group from zero for a pod no m5.large can run.
Such a file is refused (said once, naming the file and the fix) and AWS is asked instead; a cache we
wrote ourselves, 0600 in a 0700 folder, is still used."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.aws import instance_types
from reconciler.aws.cache import cache_root
from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from reconciler.config.settings import AwsConfig, Config
from tests.support.aws import MotoAws

TAG = "k8s.io/cluster-autoscaler/cache-trust"
STRANGER = 4242  # another user's uid
ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(not ROOT, reason="giving a file to another user needs root")


def config_of(aws: MotoAws) -> Config:
    return replace(aws.config([f"asg:tag={TAG}"]), aws=AwsConfig())


def believed_cpu(config: Config) -> int:
    """The allocatable millicores a fresh one-shot command believes the group's nodes have."""
    instance_types.clear_cache()
    (group,) = AwsReader(config).node_groups(config, ClusterView())
    assert group.template is not None, group.template_error
    return group.template.allocatable.get("cpu")


def the_cache() -> Path:
    (path,) = sorted(cache_root().glob("*.json"))
    return path


def plant(path: Path) -> None:
    """m5.large with 64 vCPU and 256 GiB, in a file of the right shape."""
    document = json.loads(path.read_text())
    document["instanceTypes"]["m5.large"].update(vcpus=64, memory_mib=262_144)
    path.write_text(json.dumps(document))


@pytest.fixture
def planted(aws: MotoAws) -> tuple[Config, Path]:
    aws.launch_template("tmpl", "m5.large")
    aws.asg("zero", max_size=3, tags={TAG: ""}, launch_template="tmpl")
    config = config_of(aws)
    assert believed_cpu(config) < 2_000  # a real m5.large: 2 vCPU; this run wrote the cache
    path = the_cache()
    plant(path)
    return config, path


def world_writable_file(path: Path) -> None:
    path.chmod(0o666)


def group_writable_file(path: Path) -> None:
    path.chmod(0o620)


def world_writable_folder(path: Path) -> None:
    path.parent.chmod(0o777)


def group_writable_folder(path: Path) -> None:
    path.parent.chmod(0o770)


def symlink_to_a_planted_file(path: Path) -> None:
    elsewhere = path.parent.parent / "elsewhere.json"
    path.rename(elsewhere)
    if ROOT:
        os.chown(elsewhere, STRANGER, STRANGER)
    path.symlink_to(elsewhere)


def file_of_another_user(path: Path) -> None:
    os.chown(path, STRANGER, STRANGER)


def folder_of_another_user(path: Path) -> None:
    os.chown(path.parent, STRANGER, STRANGER)


def not_a_regular_file(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)  # a reader would block on it for ever


ATTACKS: list[Callable[[Path], None]] = [
    world_writable_file,
    group_writable_file,
    world_writable_folder,
    group_writable_folder,
    symlink_to_a_planted_file,
    not_a_regular_file,
    pytest.param(file_of_another_user, marks=as_root),  # type: ignore[list-item]
    pytest.param(folder_of_another_user, marks=as_root),  # type: ignore[list-item]
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_cache_others_could_write_is_refused_and_said_once(
    planted: tuple[Config, Path], attack: Callable[[Path], None], caplog: pytest.LogCaptureFixture
) -> None:
    config, path = planted
    attack(path)
    with caplog.at_level(logging.WARNING, logger="reconciler.aws.cache"):
        assert believed_cpu(config) < 2_000  # AWS's m5.large, not the planted one
        assert believed_cpu(config) < 2_000
    said = [r.getMessage() for r in caplog.records if r.name == "reconciler.aws.cache"]
    assert len(said) == 1, said  # once, not per read
    assert str(path) in said[0] and "fix" in said[0]


def test_a_cache_we_wrote_ourselves_is_used_and_kept_private(planted: tuple[Config, Path]) -> None:
    config, path = planted
    assert believed_cpu(config) > 60_000  # the planted shape is believed: the cache is read
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.stat().st_uid == os.geteuid()


def test_a_refused_cache_is_not_rewritten_into_an_untrusted_folder(planted: tuple[Config, Path]) -> None:
    config, path = planted
    path.parent.chmod(0o777)
    path.unlink()
    assert believed_cpu(config) < 2_000
    assert list(path.parent.iterdir()) == []  # nothing left where others may write
