"""The configuration reference documents every key of the schema."""

from pathlib import Path

from reconciler.documents import load_schema

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
