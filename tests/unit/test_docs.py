"""The configuration reference documents every key of the schema."""

from pathlib import Path

from reconciler.config.documents import load_schema

ROOT = Path(__file__).parents[2]


def keys(schema: dict, root: dict, prefix: str = "") -> list[str]:  # type: ignore[type-arg]
    found = []
    for name, sub in schema.get("properties", {}).items():
        if "$ref" in sub:
            sub = root["$defs"][sub["$ref"].rsplit("/", 1)[1]]
        path = f"{prefix}{name}"
        if sub.get("type") == "object" and "properties" in sub:
            found += keys(sub, root, path + ".")
        else:
            found.append(path)
    return found


def test_every_config_key_is_documented_and_in_the_example() -> None:
    schema = load_schema("config")
    reference = (ROOT / "docs" / "configuration.md").read_text()
    example = (ROOT / "examples" / "asg-reconciler.yaml").read_text()
    for key in keys(schema, schema):
        assert f"`{key}`" in reference, f"{key} is missing from docs/configuration.md"
        assert key.rsplit(".", 1)[-1] in example, f"{key} is missing from examples/asg-reconciler.yaml"


def _documented_commands() -> list[tuple[str, str]]:
    """Every `asg-reconciler ...` line in a code block of the README or docs/: (where, line)."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        inside = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                inside = not inside
                continue
            text = line.split("#", 1)[0].strip()
            for prefix in ("$ ", ".venv/bin/"):
                text = text.removeprefix(prefix)
            if inside and text.startswith("asg-reconciler "):
                found.append((f"{path.name}:{number}", text))
    return found


def test_every_documented_command_and_option_exists() -> None:
    """The docs cannot drift from the CLI: each documented subcommand exists and takes the options
    shown with it."""
    import shlex

    import click

    from reconciler.cli.commands import cli

    commands = _documented_commands()
    assert len(commands) > 20
    for where, text in commands:
        words = shlex.split(text.replace("$(", "").replace(")", ""))[1:]
        group_options = {o for p in cli.params for o in p.opts} | {"--help", "-h"}
        while words and words[0].startswith("-"):  # global options (and their values) come first
            option = words.pop(0)
            assert option.split("=")[0] in group_options, f"{where}: unknown global option {option}"
            if "=" not in option and words and not words[0].startswith("-") and words[0] not in cli.commands:
                words.pop(0)
        if not words:
            continue  # `asg-reconciler --help`, `--version`
        command = cli.commands.get(words[0])
        assert isinstance(command, click.Command), f"{where}: no command {words[0]!r} in {text!r}"
        known = {o for p in command.params for o in p.opts} | {"--help", "-h"}
        if isinstance(command, click.Group):
            continue
        for word in words[1:]:
            if word.startswith("-") and word != "-":
                assert word.split("=")[0] in known, f"{where}: {words[0]} has no option {word}"
