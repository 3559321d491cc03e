"""Configuration: load and validate the config file (schemas/config.schema.json), and read YAML/JSON
documents safely (depth, anchors, encoding) for every layer above."""
