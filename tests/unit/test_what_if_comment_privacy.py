"""What a what-if comment may say: nothing of another namespace, no AWS identity, and everything
else as the planner said it (label keys, node names, quantities, the pull request's own pods)."""

from __future__ import annotations

import pytest

from reconciler.views.whatif import OTHER_NAMESPACE, for_comment

MINE = frozenset({"apps", "web-prod"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "anti-affinity with pod secrets/vault-0 on kubernetes.io/hostname",
            f"anti-affinity with pod {OTHER_NAMESPACE} on kubernetes.io/hostname",
        ),
        ("pod kube-system/coredns-5d8f-x: odd quantity", f"pod {OTHER_NAMESPACE}: odd quantity"),
        (
            "User: arn:aws:sts::123456789012:assumed-role/ci-reader/GitHubActions is not authorized",
            "User: (an AWS identity) is not authorized",
        ),
        ("account 123456789012 has no access", "account (an AWS account) has no access"),
        ("key AKIAIOSFODNN7EXAMPLE expired", "key (an AWS key id) expired"),
        (
            'User "system:serviceaccount:ci:what-if" cannot list pods',
            'User "(a Kubernetes identity)" cannot list pods',
        ),
    ],
)
def test_what_is_not_the_pull_requests_is_replaced(text: str, expected: str) -> None:
    assert for_comment(text, MINE) == expected


@pytest.mark.parametrize(
    "text",
    [
        "anti-affinity with pod apps/web-what-if-2 on kubernetes.io/hostname",
        "pod web-prod/api-0: needs a new node",
        "topology spread on topology.kubernetes.io/zone: every domain is at maxSkew",
        "general: insufficient cpu: needs 0.5, free 0.13; node-role.kubernetes.io/worker",
        "insufficient nvidia.com/gpu: needs 1, free 0",
        "DaemonSet pod for node ip-10-0-1-2.ec2.internal, the only node it may run on",
        "16 pending pod(s) need 6 × m5.large",
    ],
)
def test_what_is_the_pull_requests_or_no_objects_name_stays(text: str) -> None:
    assert for_comment(text, MINE) == text
