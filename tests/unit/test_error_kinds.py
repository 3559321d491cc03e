"""Metrics and logs label a failure by the type each edge raises, never by its message: rewording a
message changes no label (issue 21), and each edge's error carries its own kind."""

from __future__ import annotations

import pytest

from reconciler.aws.errors import AwsError, AwsUncertainError
from reconciler.domain.errors import OperationError, RefusedError, UncertainError, UserError
from reconciler.gitops.errors import ForgeError, GitError
from reconciler.kube.errors import KubernetesError
from reconciler.runtime.stage_loop import error_kind
from reconciler.telemetry.metrics import ERROR_KINDS


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (KubernetesError, "kubernetes"),
        (AwsError, "aws"),
        (AwsUncertainError, "aws"),
        (GitError, "git"),
        (ForgeError, "forge"),
        (OperationError, "other"),
    ],
)
@pytest.mark.parametrize(
    "message",
    ["Kubernetes API: list pods: HTTP 500", "git push to main was rejected", "AWS call failed", "x"],
)
def test_the_label_is_the_type_whatever_the_message(
    error: type[OperationError], kind: str, message: str
) -> None:
    assert error_kind(error(message)) == kind
    assert kind in ERROR_KINDS


def test_the_other_kinds() -> None:
    assert error_kind(UserError("Kubernetes API: bad config")) == "config"
    assert error_kind(RefusedError("git: refused")) == "refused"
    assert error_kind(ValueError("AWS")) == "other"


def test_an_uncertain_aws_change_is_both() -> None:
    lost = AwsUncertainError("TerminateInstanceInAutoScalingGroup: answer lost")
    assert isinstance(lost, UncertainError) and isinstance(lost, AwsError)
