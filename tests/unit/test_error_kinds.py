"""Metrics and logs label a failure by the type each edge raises, and a refusal by the kind its gate
gives it, never by the message: rewording a message changes no label (issue 21)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast, get_args

import pytest

from reconciler.apply.outcome import REFUSED, ApplyReport, GroupOutcome, GroupRun
from reconciler.aws.errors import AwsError, AwsUncertainError
from reconciler.domain.errors import OperationError, RefusalKind, RefusedError, UncertainError, UserError
from reconciler.gitops.errors import ForgeError, GitError
from reconciler.kube.control import SuspendedError
from reconciler.kube.errors import KubernetesError
from reconciler.runtime import run_loop
from reconciler.runtime.stage_loop import error_kind
from reconciler.telemetry.metrics import ERROR_KINDS, REFUSAL_KINDS, Metrics


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


def _refusals(metrics: Metrics) -> dict[str, float]:
    counted = {
        sample.labels["reason"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "asg_reconciler_apply_refusals"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert set(counted) == set(REFUSAL_KINDS)  # every kind is a series from the start, no other
    return {kind: n for kind, n in counted.items() if n}


def test_the_refusal_kinds_are_the_metric_labels() -> None:
    assert set(get_args(RefusalKind)) == set(REFUSAL_KINDS)


def test_a_refusal_carries_the_kind_its_gate_gave_it() -> None:
    assert RefusedError("x").kind == "other"
    assert RefusedError("x", kind="lease").kind == "lease"
    assert SuspendedError("apply is off (asg-reconciler resume to lift it)").kind == "suspended"


@pytest.mark.parametrize(
    "message",
    ["another apply holds lease kube-system/asg-reconciler-apply-prod", "somebody else applies now", ""],
)
def test_a_refused_apply_cycle_is_counted_by_its_kind_whatever_its_words(
    monkeypatch: pytest.MonkeyPatch, message: str
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise RefusedError(message, kind="lease")

    monkeypatch.setattr(run_loop, "apply_once", refused)
    metrics = Metrics()
    runner = SimpleNamespace(
        metrics=metrics,
        shutdown=SimpleNamespace(stopping=lambda finishes_by: False),
        health=SimpleNamespace(progress=lambda stage: None),
        _read_switch=lambda config: None,
    )
    with pytest.raises(RefusedError):
        run_loop.Runner.apply_cycle(cast(Any, runner), cast(Any, None), datetime.now(UTC))
    assert _refusals(metrics) == {"lease": 1}


def test_a_group_s_refusals_are_counted_by_the_kinds_apply_gave_them() -> None:
    run = GroupRun("general", 3, 3)
    run.refuse("i-1: reworded in any way at all", "not-approved")
    run.refuse("i-2: held back", "busy")
    run.note("drift: desired lowered outside the tool from 4 to 3 since the last apply")
    run.wait("i-3", "waits for the scale-down window: opens at 20:00; stays approved")
    outcome = run.outcome()
    assert outcome.action == REFUSED and outcome.refusals == ("not-approved", "busy")
    metrics = Metrics()
    metrics.apply(ApplyReport("c" * 40, False, (outcome, GroupOutcome("spot", "none", 1, 1))))
    assert _refusals(metrics) == {"not-approved": 1, "busy": 1}
