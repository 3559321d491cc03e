"""One Kubernetes Event to record, as data: telemetry/events.py decides which, kube/events.py writes them."""

from __future__ import annotations

from dataclasses import dataclass

POD, NODE, CONFIGMAP = "Pod", "Node", "ConfigMap"
NORMAL, WARNING = "Normal", "Warning"
MAX_MESSAGE_BYTES = 1024  # the API server's cap on an Event's message (events.k8s.io note: 1 KiB)
_ELLIPSIS = "..."


def bounded(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """`message` cut to `limit` bytes of UTF-8 (never inside a character), ending in "..." when cut."""
    data = message.encode("utf-8")
    if len(data) <= limit:
        return message
    return data[: limit - len(_ELLIPSIS)].decode("utf-8", errors="ignore") + _ELLIPSIS


@dataclass(frozen=True)
class EventSpec:
    """One Event to record on a pod, a node or the status ConfigMap; its message bounded on construction."""

    kind: str  # Pod | Node | ConfigMap (our status ConfigMap, where CA records its own events)
    namespace: str  # "" for nodes
    name: str
    uid: str
    type: str  # Normal | Warning
    reason: str
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", bounded(self.message))
