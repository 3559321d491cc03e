"""The names of the Leases that carry the cluster's name, valid for every `cluster` the config allows.

EKS allows cluster names such as `Prod_EKS` (upper case, `_`); a Kubernetes object name must be a
DNS-1123 subdomain, and the real API server refuses `asg-reconciler-apply-Prod_EKS` (422), so the
apply Lease could never be taken. A name that is already valid is kept exactly as it is (existing
deployments keep their Leases and RBAC); any other is lowercased, every run of other characters
becomes `-`, and a short hash of the original keeps two clusters that differ only there apart
(`Prod_EKS` -> `prod-eks-<8 hex>`). The same name everywhere: Git keeps the cluster's own name.
"""

from __future__ import annotations

import hashlib
import re

from reconciler.domain.model import APPLY_LEASE_PREFIX

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_OTHER = re.compile(r"[^a-z0-9]+")
_LONGEST_PREFIX = len("asg-reconciler-apply-leader-")
_MAX_NAME = 253  # a DNS-1123 subdomain


def kube_cluster_name(cluster: str) -> str:
    """`cluster` as the object names carry it: itself when it is a valid name part, else derived."""
    if _SUBDOMAIN.match(cluster) and _LONGEST_PREFIX + len(cluster) <= _MAX_NAME:
        return cluster
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:8]
    base = _OTHER.sub("-", cluster.lower()).strip("-")[: _MAX_NAME - _LONGEST_PREFIX - 9].rstrip("-")
    return f"{base}-{digest}" if base else digest


def apply_lease_name(cluster: str) -> str:
    """Apply's own Lease (one apply at a time, DESIGN §3.6), in kube-system."""
    return f"{APPLY_LEASE_PREFIX}{kube_cluster_name(cluster)}"


def leader_lease_name(stage: str, cluster: str) -> str:
    """The `run` loop's leader-election Lease of one stage (`plan` or `apply`)."""
    return f"asg-reconciler-{stage}-leader-{kube_cluster_name(cluster)}"
