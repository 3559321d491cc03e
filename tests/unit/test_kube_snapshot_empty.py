"""An empty kubectl List is a snapshot of an empty cluster, in every way kubectl can print one; an
empty file is still not a snapshot."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.snapshot_completeness import COMPLETE_DUMP
from reconciler.kube.snapshot import read_snapshot

NOW = datetime(2026, 1, 2, 21, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "content",
    [
        '{"kind": "List", "items": []}',
        '{"apiVersion": "v1", "kind": "List", "items": []}',
        # kubectl get ... -o json on an empty cluster, verbatim
        json.dumps({"apiVersion": "v1", "items": [], "kind": "List", "metadata": {"resourceVersion": ""}}),
        '{"apiVersion": "v1", "kind": "PodList", "items": []}',
        '{"kind": "List", "items": null}',  # not the pruned decoder's shape: read as a plain document
        "apiVersion: v1\nkind: List\nitems: []\n",  # -o yaml
        '{"kind": "NodeList", "items": []}\n{"kind": "PodList", "items": []}\n',  # cluster-info dump
    ],
)
def test_an_empty_list_is_an_empty_cluster(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(content)
    state = read_snapshot(path, NOW)
    assert state.nodes == ()
    assert state.pods == ()
    assert state.read_at == NOW


def test_a_directory_of_empty_lists_is_an_empty_cluster(tmp_path: Path) -> None:
    (tmp_path / "nodes.json").write_text('{"kind": "NodeList", "items": []}')
    (tmp_path / "pods.json").write_text('{"kind": "PodList", "items": []}')
    state = read_snapshot(tmp_path, NOW)
    assert (state.nodes, state.pods) == ((), ())


@pytest.mark.parametrize("content", ["", "  \n", '{"items": []}'])
def test_no_list_and_no_objects_is_still_not_a_snapshot(tmp_path: Path, content: str) -> None:
    """Only kubectl's own list says "there is nothing"; a blank file more likely says a command failed."""
    path = tmp_path / "blank.json"
    path.write_text(content)
    with pytest.raises(UserError, match="no Kubernetes objects found"):
        read_snapshot(path, NOW)


def test_a_missing_file_names_the_complete_dump(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        read_snapshot(tmp_path / "nope.json", NOW)
    assert COMPLETE_DUMP in str(info.value)
