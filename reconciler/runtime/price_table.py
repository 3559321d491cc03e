"""The instance-type price table `plan`, `run`, `simulate` and `what-if` share, and the JSON files
they read: kept apart from the simulation so that planning does not import the simulator to price
a scale-up (about 35 ms at every start of `plan` and `run`).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from reconciler.config.documents import JSON_TOO_DEEP
from reconciler.domain.errors import UserError


def prices_from_document(document: Any, label: str) -> dict[str, float]:
    """USD per hour by instance type, from `{"prices": {"m5.large": 0.096}}` or `{"m5.large": 0.096}`."""
    prices = document.get("prices", document) if isinstance(document, dict) else None
    if not isinstance(prices, dict):
        raise UserError(f'{label}: expected {{"prices": {{"m5.large": 0.096, ...}}}} (USD per hour)')
    found: dict[str, float] = {}
    for name, value in prices.items():
        if name.startswith("_"):
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise UserError(
                f"{label}: prices.{name}: must be a number of USD per hour, 0 or more (got {value!r})"
            )
        found[name] = float(value)
    return found


def load_prices(override: Path | None) -> dict[str, float]:
    """USD per hour by instance type: the shipped on-demand prices (reconciler/simulation/data),
    with `--prices FILE`'s over them. Shared by `simulate` and `what-if`, so both price alike."""
    prices = prices_from_document(packaged("prices.json"), "prices.json")
    if override is not None:
        prices.update(prices_from_document(read_json(override), str(override)))
    return prices


def shipped_prices_region() -> str:
    """The region the shipped prices are for (us-east-1 on-demand)."""
    return str(packaged("prices.json").get("region") or "us-east-1")


def packaged(name: str) -> Any:
    text = resources.files("reconciler.simulation").joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(text)


def read_json(path: Path) -> Any:
    try:
        if path.exists() and not path.is_file():  # a device never ends, a FIFO's open blocks for ever
            raise UserError(
                f"{path}: not a regular file (a FIFO, socket, device or directory); name a JSON file"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{path}: {JSON_TOO_DEEP}") from None
