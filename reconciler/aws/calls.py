"""How many AWS requests a command made, per API, counted where botocore sends them.

Counted on `before-send`, once per HTTP request: every page of a paginator and every retry of a
throttled call is a request AWS rate-limits, so each counts. Users see the figures as `awsCalls` in
`plan` and `status` JSON, and the call-budget test reads the same counter.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any


class CallCounter:
    """Requests per `Service.Operation` (e.g. `AutoScaling.DescribeAutoScalingGroups`), thread-safe:
    the run loop's stages and apply's parallel drains share clients."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        service = client.meta.service_model.service_id
        name = str(service).replace(" ", "")
        client.meta.events.register(f"before-send.{service.hyphenize()}", self._counted(name))

    def _counted(self, service: str) -> Any:
        """A handler: a returned None lets botocore send the request as usual."""

        def count(event_name: str = "", **_: Any) -> None:
            operation = event_name.rsplit(".", 1)[-1] or "unknown"
            with self._lock:
                self._counts[f"{service}.{operation}"] += 1

        return count

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def difference(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {
        key: count - before.get(key, 0) for key, count in sorted(after.items()) if count > before.get(key, 0)
    }
