"""A watch that falls behind the fake's event log is ended with 410, never silently skipped ahead.

The real kube-apiserver's watch cache keeps a bounded window of events per resource; a watcher that
cannot keep up is terminated, and resuming from its last resourceVersion, now older than the window,
answers `too old resource version` (410 Expired), so the client lists again (client-go's reflector).
The fake keeps `max_events` per kind. A watch whose next event was trimmed from that log while it
was writing the previous batch must end with the same ERROR 410: skipping to the oldest retained
event loses every event in between, and a reflector resumed there never learns of the objects
they created (the cache's differential test saw exactly that under load).
"""

from __future__ import annotations

from typing import Any

import orjson

from reconciler.demo.kube_api import FakeKubeAPI, resource_for
from reconciler.demo.kube_api.wire import _Watch
from tests.support import k8s_objects as k


def test_a_watch_whose_next_events_were_trimmed_ends_with_410() -> None:
    api = FakeKubeAPI(max_events=10)
    api.put(k.pod("first", "shop", node_name="node-a"))
    since = api.resource_version
    api.put(k.pod("second", "shop", node_name="node-a"))
    lines: list[dict[str, Any]] = []

    def write(data: bytes) -> None:
        lines.extend(orjson.loads(line) for line in data.splitlines())
        if len(lines) == 1:  # while the first batch is being written, the log overflows
            api.put_many(k.pod(f"burst-{i}", "shop", node_name="node-a") for i in range(30))

    query = {"watch": "true", "resourceVersion": str(since), "timeoutSeconds": "1"}
    api.serve_watch(_Watch(resource_for("Pod"), None, query), write)

    kinds = [line["type"] for line in lines]
    names = [line["object"]["metadata"]["name"] for line in lines if line["type"] == "ADDED"]
    assert names[0] == "second"
    assert kinds[-1] == "ERROR" and lines[-1]["object"]["code"] == 410
    # what was delivered before the end is the burst from its start, in order: nothing skipped
    assert names[1:] == [f"burst-{i}" for i in range(len(names) - 1)]
