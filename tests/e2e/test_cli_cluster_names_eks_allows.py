"""A cluster name EKS allows but Kubernetes names do not (`Prod_EKS`: upper case, `_`) still gets
Leases the API server accepts: apply takes `asg-reconciler-apply-prod-eks-<hash>` (the fake API
refuses an invalid name with 422, as kube-apiserver does), while Git keeps the cluster's own name."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.domain.lease_names import apply_lease_name
from tests.support.apply_world import World, approved
from tests.support.cli import run
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


def test_apply_of_a_cluster_named_like_eks_allows_takes_a_valid_lease(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.config.write_text(world.config.read_text().replace("cluster: prod\n", "cluster: Prod_EKS\n", 1))
    approved(world, capsys)  # plan (manifest capacity/Prod_EKS.yaml) and a signed approval
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.b_id not in world.in_service()
    lease = world.kube.get_object("Lease", "kube-system", apply_lease_name("Prod_EKS"))
    assert lease is not None and lease["metadata"]["name"].startswith("asg-reconciler-apply-prod-eks-")
    assert "cluster: Prod_EKS" in git("show", "main:capacity/Prod_EKS.yaml", cwd=world.remote)


def test_validate_names_the_leases_to_grant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "asg-reconciler.yaml"
    config.write_text('cluster: Prod_EKS\nregion: us-east-1\nnodeGroups: {explicit: ["0:3:general"]}\n')
    result = run(capsys, "validate", str(config))
    assert result.code == 0, result.err
    derived = apply_lease_name("Prod_EKS")
    assert f"{config}:1: cluster:" in result.err and derived in result.err
    assert "base/cluster.yaml" in result.err
    config.write_text('cluster: prod-eks\nregion: us-east-1\nnodeGroups: {explicit: ["0:3:general"]}\n')
    assert run(capsys, "validate", str(config)).err == ""  # a valid name: nothing to say
