"""A rendered application manifest of thousands of documents reads in time linear in its size, with
every line number still the file's. Each document used to be parsed behind as many blank lines as
came before it (so the parser's own line numbers were the file's): quadratic: 17 s for 2,000 small
documents, minutes for a 10,000-document bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.config import documents
from reconciler.domain.errors import UserError
from reconciler.kube import manifest_files
from reconciler.kube.workloads import read_workloads

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  a: b\n"
DEPLOYMENT = (
    "apiVersion: apps/v1\n"
    "kind: Deployment\n"
    "metadata: {{name: web}}\n"
    "spec:\n"
    "  replicas: {replicas}\n"
    "  selector: {{matchLabels: {{app: web}}}}\n"
    "  template:\n"
    "    spec:\n"
    "      containers: [{{name: a}}]\n"
)
COUNT = 600


def bundle(tmp_path: Path, last: str) -> tuple[Path, int]:
    """COUNT ConfigMaps, then `last`; and the file line `last` starts on."""
    text = "---\n".join(CONFIGMAP.format(i=i) for i in range(COUNT)) + "---\n"
    path = tmp_path / "bundle.yaml"
    path.write_text(text + last)
    return path, text.count("\n") + 1


def test_the_parser_reads_each_document_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = bundle(tmp_path, DEPLOYMENT.format(replicas=2))
    parsed = 0
    real = documents.parse_yaml

    def counting(text: str, label: str, *args: object, **kwargs: object) -> object:
        nonlocal parsed
        parsed += len(text)
        return real(text, label, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manifest_files, "parse_yaml", counting)
    manifests = read_workloads([path])
    assert len(manifests.skipped) == COUNT and [w.name for w in manifests.workloads] == ["web"]
    assert parsed <= 2 * len(path.read_text())


def test_line_numbers_are_the_files(tmp_path: Path) -> None:
    path, start = bundle(tmp_path, DEPLOYMENT.format(replicas=2))
    (web,) = read_workloads([path]).workloads
    assert str(web.source) == f"{path}:{start + 1}: document {COUNT + 1}"  # its `kind:` line
    # an error the workload reader finds, and one the YAML parser finds, both on the file's lines
    path, start = bundle(tmp_path, DEPLOYMENT.format(replicas='"lots"'))
    with pytest.raises(UserError, match=rf"bundle.yaml:{start + 1}: document {COUNT + 1}: .*spec.replicas"):
        read_workloads([path])
    path, start = bundle(tmp_path, DEPLOYMENT.format(replicas="[1, 2"))
    with pytest.raises(UserError, match=rf"bundle.yaml:{start + 5}: not valid YAML"):
        read_workloads([path])


def test_a_file_past_the_bound_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong path (a dump of the cluster, a device) is refused before it is parsed or held whole."""
    monkeypatch.setattr(manifest_files, "MAX_INPUT_BYTES", 1024)
    big = tmp_path / "dump.yaml"
    big.write_text("# padding\n" * 200)
    with pytest.raises(UserError, match=r"dump.yaml: the manifests given are larger than 1 KiB in all"):
        read_workloads([big])


def test_a_fifo_or_device_is_not_read(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a regular file"):
        read_workloads([Path("/dev/zero")])


def test_an_empty_flow_mapping_after_the_first_document_is_read(tmp_path: Path) -> None:
    """`selector: {}` in any document but the first was an AttributeError traceback (its line
    record is empty, and every later document's lines are moved to the file's)."""
    path, _ = bundle(tmp_path, DEPLOYMENT.format(replicas=2).replace("{{app: web}}", "{}"))
    path.write_text(path.read_text().replace("selector: {matchLabels: {app: web}}", "selector: {}"))
    assert [w.name for w in read_workloads([path]).workloads] == ["web"]
