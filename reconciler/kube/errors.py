"""This edge's typed failure: what metrics and logs label it by (DESIGN §4: never from message text)."""

from __future__ import annotations

from reconciler.domain.errors import OperationError


class KubernetesError(OperationError):
    """The Kubernetes API server failed or could not be reached (after kube/retry.py's tries)."""

    edge = "kubernetes"
