"""`validate FILE...`: configs and manifests, errors with file:line, warnings for mirror edits."""

from __future__ import annotations

from pathlib import Path

from reconciler.gitops.validate import looks_like_manifest, previous_from_git, validate_files
from tests.support.git import ALICE, SEED_MANIFEST, git

CONFIG = "cluster: prod-eks\nscaleDown:\n  unneededTime: 10m\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_good_files_pass(tmp_path: Path) -> None:
    report = validate_files(
        [write(tmp_path / "c.yaml", CONFIG), write(tmp_path / "m.yaml", SEED_MANIFEST)],
        previous=lambda p: None,
    )
    assert report.errors == () and report.warnings == () and report.exit_code == 0


def test_errors_name_file_line_and_fix(tmp_path: Path) -> None:
    bad_config = write(tmp_path / "c.yaml", CONFIG.replace("10m", "10 minutes"))
    bad_manifest = write(tmp_path / "m.yaml", SEED_MANIFEST.replace("desired: 1", "desired: 9"))
    broken = write(tmp_path / "b.yaml", "cluster: [\n")
    report = validate_files(
        [bad_config, bad_manifest, broken, tmp_path / "missing.yaml"], previous=lambda p: None
    )
    assert report.exit_code == 2
    lines = [str(p) for p in report.errors]
    assert lines[0] == f'{bad_config}:3: scaleDown.unneededTime: "10 minutes" is not a duration (use 10m)'
    assert lines[1].startswith(f"{bad_manifest}:14: nodeGroups.asg-b.desired: 9 is above maxSize 5")
    assert lines[2].startswith(f"{broken}:2: not valid YAML")
    assert lines[3].startswith(f"{tmp_path / 'missing.yaml'}: cannot read")


def test_mirror_edit_warns_but_passes(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", SEED_MANIFEST.replace("maxSize: 10", "maxSize: 12"))
    report = validate_files([path], previous=lambda p: SEED_MANIFEST)
    assert report.exit_code == 0
    (warning,) = report.warnings
    assert str(warning) == (
        f"{path}:10: nodeGroups.asg-a.maxSize: changed 10 -> 12: editing maxSize changes nothing;"
        " change the ASG (the next plan mirrors it back)"
    )


def test_previous_version_comes_from_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git("init", "--quiet", "--initial-branch=main", str(repo))
    manifest = repo / "capacity" / "c.yaml"
    manifest.parent.mkdir()
    manifest.write_text(SEED_MANIFEST)
    env = ALICE.env()
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", "one", cwd=repo, env=env)
    assert previous_from_git(manifest) is None  # no parent commit, no local change
    manifest.write_text(SEED_MANIFEST.replace("minSize: 1", "minSize: 0"))
    assert previous_from_git(manifest) == SEED_MANIFEST  # local edit: compare with HEAD
    (warning,) = validate_files([manifest]).warnings
    assert "editing minSize changes nothing" in warning.message
    git("commit", "--quiet", "-am", "two", cwd=repo, env=env)
    assert previous_from_git(manifest) == SEED_MANIFEST  # committed: compare with HEAD^
    assert previous_from_git(tmp_path / "elsewhere.yaml") is None


def test_kind_detection() -> None:
    assert looks_like_manifest({"cluster": "c", "nodeGroups": {"a": {"desired": 1}}})
    assert looks_like_manifest({"cluster": "c", "nodeGroups": {}})
    assert looks_like_manifest({"version": 1, "cluster": "c"})
    assert not looks_like_manifest({"cluster": "c", "nodeGroups": {"explicit": ["0:6:a"]}})
    assert not looks_like_manifest({"cluster": "c"})
    assert not looks_like_manifest(["x"])
