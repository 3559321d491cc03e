"""YAML we are handed is refused before it can expand: anchors and aliases (a "billion laughs" in
~1 KB), nesting deeper than MAX_DEPTH (a RecursionError traceback), and text that is not UTF-8.
Each is one line naming the file and the line, through every reader of YAML we have."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.config.documents import MAX_DEPTH, decode_utf8, parse_yaml
from reconciler.config.settings import load_config
from reconciler.demo.kube_api import ApiError
from reconciler.demo.kube_api.wire import _json_or_yaml
from reconciler.domain.errors import UserError
from reconciler.gitops.manifest import manifest_problems, parse_manifest
from reconciler.gitops.manifest_edit import ManifestEditor
from reconciler.gitops.records import stored_records
from reconciler.gitops.state import decode as decode_state
from reconciler.gitops.validate import validate_files
from reconciler.kube.snapshot import read_snapshot
from reconciler.simulation.trace import read_groups, read_trace
from tests.support.deadline import deadline

LIMIT_S = 3.0  # a hang guard, not a speed test: each refusal takes milliseconds (1,000 nested `[`
# took seconds when only the composer counted depth: the scanner looked ahead from each of them)


def laughs(indent: int) -> str:
    """The billion laughs under an `x-` key: 9 levels of 10 aliases, 10^9 strings once expanded."""
    pad = " " * indent
    lines = [f"{pad}x-lol:", f"{pad}  a: &a [" + ", ".join(['"lol"'] * 10) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{pad}  {name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def deep_flow(indent: int, depth: int = 5000) -> str:
    return f"{' ' * indent}x-deep: " + "[" * depth + "]" * depth + "\n"


def deep_block(indent: int, depth: int = 5000) -> str:
    """Block sequences nested on one line (`- - - x`): no flow brackets, same depth."""
    return f"{' ' * indent}x-deep:\n{' ' * (indent + 2)}" + "- " * depth + "x\n"


MANIFEST = "version: 1\ncluster: prod\nnodeGroups:\n  general:\n    desired: 1\n{payload}"
CONFIG = "cluster: prod\nscaleDown:\n  unneededTime: 10m\n  x-extra:\n{payload}"
GROUPS = "groups:\n  - name: general\n{payload}"
SNAPSHOT = (
    "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Pod\n"
    "    metadata:\n      name: web\n      namespace: shop\n      annotations:\n{payload}"
)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), 1) if needle in line)


def _validate(path: Path) -> None:
    report = validate_files([path], previous=lambda _: None)
    assert len(report.errors) == 1
    raise UserError(str(report.errors[0]))


def _problems(path: Path) -> None:
    (problem,) = manifest_problems(path.read_text(), str(path))
    raise UserError(str(problem))


READERS: dict[str, tuple[str, int, Callable[[Path], Any]]] = {
    "manifest": (MANIFEST, 4, lambda p: parse_manifest(p.read_text(), str(p))),
    "manifest problems": (MANIFEST, 4, _problems),
    "manifest editor": (MANIFEST, 4, lambda p: ManifestEditor(p.read_text(), str(p))),
    "validate manifest": (MANIFEST, 4, _validate),
    "validate config": (CONFIG, 4, _validate),
    "config": (CONFIG, 4, load_config),
    "trace groups": (GROUPS, 4, read_groups),
    "snapshot": (SNAPSHOT, 8, lambda p: read_snapshot(p, datetime(2026, 1, 1, tzinfo=UTC))),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("payload", "needle", "says"),
    [
        (laughs, "&a", "anchor &a: YAML anchors and aliases are refused"),
        (deep_flow, "x-deep", f"nested more than {MAX_DEPTH} levels deep"),
        (deep_block, "- - -", f"nested more than {MAX_DEPTH} levels deep"),
    ],
    ids=["billion-laughs", "deep-flow", "deep-block"],
)
def test_every_reader_refuses_before_expanding_in_one_line_naming_file_and_line(
    tmp_path: Path, reader: str, payload: Callable[[int], str], needle: str, says: str
) -> None:
    template, indent, read = READERS[reader]
    text = template.format(payload=payload(indent))
    path = tmp_path / "input.yaml"
    path.write_text(text)
    with deadline(LIMIT_S), pytest.raises(UserError) as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line_of(text, needle)}: "), message
    assert says in message and "\n" not in message


def test_the_depth_limit_is_exact_and_counts_mappings_and_sequences_flow_or_block() -> None:
    assert parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok.yaml") is not None
    assert parse_yaml("{a: " * MAX_DEPTH + "1" + "}" * MAX_DEPTH, "ok.yaml") is not None

    def nested_mappings(depth: int) -> str:
        return "".join(f"{'  ' * level}k{level}:\n" for level in range(depth)) + "  " * depth + "x\n"

    assert parse_yaml(nested_mappings(MAX_DEPTH), "ok.yaml") is not None  # then a scalar
    for text, line in [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1),
        ("a:\n  " + "{a: " * MAX_DEPTH + "1" + "}" * MAX_DEPTH, 2),
        ("- " * (MAX_DEPTH + 1) + "x", 1),
        (nested_mappings(MAX_DEPTH + 1), MAX_DEPTH + 1),
    ]:
        with pytest.raises(UserError, match=rf"^deep.yaml:{line}: nested more than {MAX_DEPTH} levels deep"):
            parse_yaml(text, "deep.yaml")


def test_a_million_open_brackets_are_refused_at_once() -> None:
    with deadline(LIMIT_S), pytest.raises(UserError, match="nested more than"):
        parse_yaml("x: " + "[" * 1_000_000, "huge.yaml")


@pytest.mark.parametrize(
    ("text", "line", "found"),
    [
        ("a: &base {desired: 1}\nb: *base\n", 1, "anchor &base"),
        ("a: 1\nb: *nowhere\n", 2, "alias *nowhere"),  # an alias alone is named, not "undefined"
        ("a: {desired: 1}\nb:\n  <<: *a\n", 3, "alias *a"),  # merge keys need an alias too
        ("a: &scalar lol\n", 1, "anchor &scalar"),  # even one that is never used
        ("--- &doc\na: 1\n", 1, "anchor &doc"),
    ],
)
def test_anchors_and_aliases_are_refused_wherever_they_stand(text: str, line: int, found: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_yaml(text, "m.yaml")
    assert str(caught.value) == (
        f"m.yaml:{line}: {found}: YAML anchors and aliases are refused, so a small file cannot expand "
        "to millions of values (write the value out in full; `yq 'explode(.)' FILE` does it)"
    )


def test_ordinary_documents_still_read_with_comments_and_lines() -> None:
    text = MANIFEST.format(payload="    x-note: 'an & and a * in a string are fine'  # kept\n")
    manifest = parse_manifest(text, "m.yaml")
    assert manifest.group("general") is not None and manifest.group("general").lines["desired"] == 5  # type: ignore[union-attr]
    editor = ManifestEditor(text, "m.yaml")
    assert "# kept" in editor.render()


def test_not_utf8_names_the_line_and_the_fix(tmp_path: Path) -> None:
    data = b"cluster: prod\n# caf\xe9 au lait\n"
    with pytest.raises(UserError) as caught:
        decode_utf8(data, "main:capacity/prod.yaml")
    assert str(caught.value) == (
        "main:capacity/prod.yaml:2: not UTF-8 text (byte 0xe9 in column 6); "
        "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
    )
    path = tmp_path / "prod.yaml"
    path.write_bytes(data)
    with pytest.raises(UserError, match=rf"^{path}:2: not UTF-8 text \(byte 0xe9 in column 6\)"):
        load_config(path)
    with pytest.raises(UserError, match=rf"^{path}:2: not UTF-8 text"):
        read_groups(path)
    (problem,) = validate_files([path], previous=lambda _: None).errors
    assert str(problem).startswith(f"{path}:2: not UTF-8 text (byte 0xe9 in column 6)")


def test_the_fake_kubernetes_api_answers_a_bomb_in_an_apply_patch_with_400() -> None:
    body = ("metadata:\n" + laughs(2)).encode()
    with deadline(LIMIT_S), pytest.raises(ApiError) as caught:
        _json_or_yaml(body)
    assert caught.value.code == 400 and "anchor &a" in caught.value.message


# JSON has no aliases, but its readers recurse too: 5,000 levels were a RecursionError traceback.
DEEP_JSON = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("trace.jsonl", '{"kind": "cluster", "x": ' + DEEP_JSON + "}\n", 1),
        ("pods.json", '{"kind": "List", "items": [' + DEEP_JSON + "]}\n", None),  # one object
        ("dump.json", '{"kind": "Pod"}\n{"kind": "List", "items": [' + DEEP_JSON + "]}\n", None),  # a stream
        ("bare.json", '[{"kind": "List", "items": [' + DEEP_JSON + "]}]\n", None),
    ],
)
def test_deep_json_is_one_line_not_a_recursion_error(
    tmp_path: Path, name: str, text: str, line: int | None
) -> None:
    path = tmp_path / name
    path.write_text(text)

    def snapshot(p: Path) -> Any:
        return read_snapshot(p, datetime(2026, 1, 1, tzinfo=UTC))

    read: Callable[[Path], Any] = read_trace if name.endswith(".jsonl") else snapshot
    with pytest.raises(UserError) as caught:
        read(path)
    where = f"{path}:{line}" if line else f"{path}"
    assert str(caught.value).startswith(f"{where}: JSON nested too deeply"), str(caught.value)


def test_a_planted_deep_note_or_state_file_is_unreadable_not_a_traceback() -> None:
    """Apply's notes and the state branch are pushable with the plan credentials."""
    stored, problems = stored_records('{"version": 1, "records": ' + DEEP_JSON + "}", "c0ffee")
    assert stored == () and any("nested too deeply" in p for p in problems), problems
    with pytest.raises(UserError, match=r"^st:state.json: not a valid state file \(JSON nested too deeply"):
        decode_state('{"version": 1, "since": ' + DEEP_JSON + "}", "st:state.json")
