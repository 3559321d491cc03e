"""examples/iam/: every document parses, looks like an IAM policy, and names only real actions.

Known actions come from botocore's own service models (an operation name is its IAM action name under
the service's signing name), so a typo such as `autoscaling:DescribeAutoscalingGroups` fails here
rather than as an AccessDenied in someone's cluster. Which actions each stage needs is measured in
tests/e2e/test_aws_call_coverage.py.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import pytest

ROOT = Path(__file__).resolve().parents[2]
IAM = ROOT / "examples" / "iam"
DOCUMENTS = sorted(IAM.glob("*.json"))
IDENTITY = [p for p in DOCUMENTS if p.name.endswith("-policy.json")]
TRUST = [p for p in DOCUMENTS if p.name.startswith("trust-")]
SERVICES = ("autoscaling", "ec2", "eks", "sts")
# IAM actions that are permissions only, with no API operation of their own in botocore's models.
PERMISSION_ONLY = {
    "sts:TagSession",  # lets the caller of AssumeRole pass session tags (EKS Pod Identity does)
}
PLACEHOLDERS = ("ACCOUNT_ID", "REGION", "CLUSTER_NAME", "NAMESPACE", "OIDC_ID")
STATEMENT_KEYS = {"Sid", "Effect", "Action", "Resource", "Principal", "Condition"}
CLUSTER_TAG = "aws:ResourceTag/k8s.io/cluster-autoscaler/CLUSTER_NAME"


@cache
def known_actions() -> frozenset[str]:
    session = botocore.session.get_session()
    actions = set(PERMISSION_ONLY)
    for name in SERVICES:
        model = session.get_service_model(name)
        actions.update(f"{model.signing_name}:{operation}" for operation in model.operation_names)
    return frozenset(actions)


def load(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    assert isinstance(document, dict), f"{path.name}: not a JSON object"
    return document


def actions(statement: dict[str, Any]) -> list[str]:
    listed = statement["Action"]
    return [listed] if isinstance(listed, str) else list(listed)


def test_the_examples_are_there() -> None:
    names = {p.name for p in DOCUMENTS}
    assert {"plan-policy.json", "apply-policy.json"} <= names
    for mechanism in ("irsa", "pod-identity"):
        assert {f"trust-{mechanism}-plan.json", f"trust-{mechanism}-apply.json"} <= names


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_a_valid_looking_policy_document_with_only_known_actions(path: Path) -> None:
    document = load(path)
    assert set(document) == {"Version", "Statement"}, f"{path.name}: IAM rejects other top-level keys"
    assert document["Version"] == "2012-10-17"
    statements = document["Statement"]
    assert isinstance(statements, list) and statements
    sids = [s.get("Sid") for s in statements if "Sid" in s]
    assert len(sids) == len(set(sids)), f"{path.name}: duplicate Sid"
    for statement in statements:
        assert set(statement) <= STATEMENT_KEYS, f"{path.name}: {set(statement) - STATEMENT_KEYS}"
        assert statement["Effect"] in ("Allow", "Deny")
        if "Sid" in statement:
            assert re.fullmatch(r"[A-Za-z0-9]+", statement["Sid"]), f"{path.name}: Sid must be alphanumeric"
        listed = actions(statement)
        assert listed and all(isinstance(a, str) for a in listed)
        assert len(listed) == len(set(listed)), f"{path.name}: an action listed twice"
        for action in listed:
            assert "*" not in action, f"{path.name}: {action}: no wildcard actions"
            assert action in known_actions(), f"{path.name}: {action} is not a known IAM action"
        condition = statement.get("Condition", {})
        assert isinstance(condition, dict)
        for operator, keys in condition.items():
            assert re.fullmatch(r"[A-Za-z]+", operator), f"{path.name}: condition operator {operator!r}"
            assert isinstance(keys, dict) and keys
            for value in keys.values():
                assert isinstance(value, str) or (isinstance(value, list) and value)


@pytest.mark.parametrize("path", IDENTITY, ids=lambda p: p.name)
def test_identity_policies_name_resources_and_no_principal(path: Path) -> None:
    for statement in load(path)["Statement"]:
        assert "Principal" not in statement and "Resource" in statement


@pytest.mark.parametrize("path", TRUST, ids=lambda p: p.name)
def test_trust_policies_name_a_principal_and_no_resource(path: Path) -> None:
    for statement in load(path)["Statement"]:
        assert "Principal" in statement and "Resource" not in statement


def test_plan_only_reads() -> None:
    for statement in load(IAM / "plan-policy.json")["Statement"]:
        for action in actions(statement):
            assert action.split(":")[1].startswith("Describe"), f"the plan policy grants {action}"


def test_apply_writes_only_with_the_cluster_tag() -> None:
    for statement in load(IAM / "apply-policy.json")["Statement"]:
        writes = [a for a in actions(statement) if not a.split(":")[1].startswith("Describe")]
        if not writes:
            continue
        assert sorted(writes) == [
            "autoscaling:SetDesiredCapacity",
            "autoscaling:TerminateInstanceInAutoScalingGroup",
        ]
        assert statement["Resource"] != "*"
        assert statement["Condition"] == {"Null": {CLUSTER_TAG: "false"}}


@pytest.mark.parametrize("stage", ["plan", "apply"])
def test_each_role_trusts_only_its_own_service_account(stage: str) -> None:
    (irsa,) = load(IAM / f"trust-irsa-{stage}.json")["Statement"]
    assert irsa["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert irsa["Principal"]["Federated"].endswith(":oidc-provider/oidc.eks.REGION.amazonaws.com/id/OIDC_ID")
    equals = irsa["Condition"]["StringEquals"]
    assert equals["oidc.eks.REGION.amazonaws.com/id/OIDC_ID:aud"] == "sts.amazonaws.com"
    assert equals["oidc.eks.REGION.amazonaws.com/id/OIDC_ID:sub"] == (
        f"system:serviceaccount:NAMESPACE:asg-reconciler-{stage}"
    )

    (pod_identity,) = load(IAM / f"trust-pod-identity-{stage}.json")["Statement"]
    assert pod_identity["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(actions(pod_identity)) == ["sts:AssumeRole", "sts:TagSession"]
    assert pod_identity["Condition"]["StringEquals"] == {
        "aws:RequestTag/eks-cluster-name": "CLUSTER_NAME",
        "aws:RequestTag/kubernetes-namespace": "NAMESPACE",
        "aws:RequestTag/kubernetes-service-account": f"asg-reconciler-{stage}",
    }


def test_every_placeholder_is_one_the_deploy_guide_explains() -> None:
    guide = (ROOT / "docs" / "deploy-aws.md").read_text()
    for placeholder in PLACEHOLDERS:
        assert f"`{placeholder}`" in guide, f"docs/deploy-aws.md does not explain {placeholder}"
    for path in DOCUMENTS:
        capitals = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\bREGION\b", path.read_text()))
        assert capitals <= set(PLACEHOLDERS), f"{path.name}: unexplained placeholder {capitals}"


@pytest.mark.parametrize("stage", ["plan", "apply"])
def test_the_role_may_describe_its_own_cluster_for_update_kubeconfig(stage: str) -> None:
    """Found by review (issue 28): the CI workflows run `aws eks update-kubeconfig`, which calls
    eks:DescribeCluster, and no shipped policy granted it: the first run failed with AccessDenied.
    Granted on the one cluster's ARN, not on every cluster of the account."""
    workflows = ROOT / "examples" / "github-actions"
    assert "aws eks update-kubeconfig" in (workflows / f"{stage}.yml").read_text()
    statements = load(IAM / f"{stage}-policy.json")["Statement"]
    (statement,) = [s for s in statements if "eks:DescribeCluster" in actions(s)]
    assert actions(statement) == ["eks:DescribeCluster"]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == "arn:aws:eks:REGION:ACCOUNT_ID:cluster/CLUSTER_NAME"
    others = [s for s in statements if s is not statement]
    # the only other EKS action: DescribeNodegroup, on this cluster's node groups (managed node groups)
    assert [a for s in others for a in actions(s) if a.startswith("eks:")] == ["eks:DescribeNodegroup"]
    (nodegroups,) = [s for s in others if "eks:DescribeNodegroup" in actions(s)]
    assert nodegroups["Resource"] == "arn:aws:eks:REGION:ACCOUNT_ID:nodegroup/CLUSTER_NAME/*/*"
