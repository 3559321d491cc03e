"""The kill switch fails safe whoever pulls it (issue 24 item 7; found by an attack): `run.namespace`
defaults to "", "the pod's own namespace, else kube-system", so one config names two namespaces:
apply in its pod reads its own, while `asg-reconciler suspend` from a laptop or a CI job writes
kube-system. With run.namespace unset, apply in a pod reads both, and `suspend` outside a pod writes
where apply's leader Lease is (else kube-system)."""

from __future__ import annotations

import pytest

import reconciler.kube.control as control
from tests.support import k8s_objects as k
from tests.support.apply_world import World


def test_suspend_with_the_default_namespace_stops_the_apply_that_runs_in_a_pod(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "apply").code == 0
    # a person pulls the switch with the deployment's config (run.namespace unset), not in a pod
    pulled = world.cli(capsys, "suspend", "--reason", "incident 42")
    # either refuse to guess, or the switch must reach the apply that runs in namespace asg-reconciler
    if pulled.code != 0:
        return
    # apply runs in its pod, in namespace asg-reconciler (what run_namespace reads from the SA file)
    monkeypatch.setattr(control, "run_namespace", lambda config: config.run.namespace or "asg-reconciler")
    world.kube.put(k.pod("job-0", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    world.kube.put(k.pod("job-1", "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))
    assert world.cli(capsys, "plan").code == 0  # pending pods: main raised (plan only writes Git)
    before = world.desired()
    result = world.cli(capsys, "apply")
    assert result.code == 3 and "suspended" in result.out + result.err, (pulled.out, result.out, result.err)
    assert world.desired() == before
