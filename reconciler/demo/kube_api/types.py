"""The fake API's shared type aliases and the DROP fault answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Query = dict[str, str]
FaultResult = None | float | int | str | tuple[int, Obj | None]
Fault = Callable[[str, str, Query], FaultResult]
"""`fault(method, path, query)`: None to serve normally, a number of seconds to delay then serve,
`(status, body)` to answer with that (body None: a Status for the code), or `DROP` to close the
connection without answering."""

DROP = "drop"
