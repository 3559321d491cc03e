"""What-if reads a pull request's files: what it reads, and how long parsing them may take, is bounded
by what it is given. A symbolic link out of the folder (to /etc/passwd, to the runner's credentials)
is refused by name, without a byte of its target in the message; and every file given is read
against one budget of bytes and objects, checked before each is parsed (YAML costs ~7 s a MiB to
parse, three times that when crafted: 32 MiB took minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.domain.errors import UserError
from reconciler.kube import manifest_files
from reconciler.kube.workloads import read_workloads

SECRET = "hunter2-do-not-print"
DEPLOYMENT = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n"
    "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
    "    spec:\n      containers: [{name: a, image: a}]\n"
)
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"


def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "runner" / "credentials"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\n")
    return secret


def test_a_link_out_of_the_folder_is_refused_without_its_content(tmp_path: Path) -> None:
    secret = outside(tmp_path)
    folder = tmp_path / "deploy"
    folder.mkdir()
    (folder / "web.yaml").write_text(DEPLOYMENT)
    (folder / "leak.yaml").symlink_to(secret)
    with pytest.raises(UserError) as refused:
        read_workloads([folder])
    message = str(refused.value)
    assert "leak.yaml: a symbolic link that leads out of" in message
    assert SECRET not in message and "runner" not in message
    # named on the command line, the same
    with pytest.raises(UserError, match="leak.yaml: a symbolic link that leads out of") as named:
        read_workloads([folder / "leak.yaml"])
    assert SECRET not in str(named.value)


def test_a_linked_directory_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = outside(tmp_path)
    (secret.parent / "x.yaml").write_text(SECRET)
    folder = tmp_path / "deploy"
    folder.mkdir()
    (folder / "web.yaml").write_text(DEPLOYMENT)
    (folder / "more").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(UserError, match="more: a symbolic link that leads out of") as refused:
        read_workloads([folder])
    assert SECRET not in str(refused.value)


def test_a_linked_folder_on_the_way_to_a_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = outside(tmp_path)
    (secret.parent / "creds.yaml").write_text(SECRET)
    checkout = tmp_path / "checkout"
    (checkout / "deploy").mkdir(parents=True)
    (checkout / "deploy" / "sub").symlink_to(secret.parent, target_is_directory=True)
    monkeypatch.chdir(checkout)
    for given in (Path("deploy/sub/creds.yaml"), Path("deploy/sub")):
        with pytest.raises(UserError, match=r"a symbolic link that leads out") as refused:
            read_workloads([given])
        assert SECRET not in str(refused.value)


def test_a_link_inside_the_folder_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "deploy"
    folder.mkdir()
    (folder / "web.txt").write_text(DEPLOYMENT)  # not a manifest name: read only through the link
    (folder / "web.yaml").symlink_to("web.txt")
    assert [w.name for w in read_workloads([folder]).workloads] == ["web"]
    assert [w.name for w in read_workloads([folder / "web.yaml"]).workloads] == ["web"]


def test_a_file_that_is_not_an_object_is_not_quoted(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(f"{SECRET}\n")
    with pytest.raises(UserError) as refused:
        read_workloads([path])
    assert SECRET not in str(refused.value) and "got a string" in str(refused.value)


def test_the_byte_budget_is_for_all_the_files_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manifest_files, "MAX_INPUT_BYTES", 3 * len(DEPLOYMENT) + 10)
    paths = []
    for n in range(4):
        path = tmp_path / f"w{n}.yaml"
        path.write_text(DEPLOYMENT.replace("name: web", f"name: web{n}"))
        paths.append(path)
    assert len(read_workloads(paths[:3]).workloads) == 3
    with pytest.raises(UserError, match=r"w3.yaml: the manifests given are larger than .* in all"):
        read_workloads(paths)


def test_thousands_of_tiny_documents_stop_at_the_object_budget_before_they_are_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bundle.yaml"
    path.write_text("---\n".join(CONFIGMAP.format(i=i) for i in range(manifest_files.MAX_OBJECTS + 1)))
    parsed = 0
    real = manifest_files.parse_yaml

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal parsed
        parsed += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manifest_files, "parse_yaml", counting)
    with pytest.raises(UserError, match=r"bundle.yaml:\d+: document 2001: more than 2000 objects"):
        read_workloads([path])
    assert parsed == manifest_files.MAX_OBJECTS
