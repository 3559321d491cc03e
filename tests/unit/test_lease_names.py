"""Lease names for every cluster name the config schema accepts: valid Kubernetes names, the same
as before for a name that already was one, distinct for clusters that differ only in case or `_`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reconciler.domain.lease_names import apply_lease_name, kube_cluster_name, leader_lease_name
from reconciler.kube.names import subdomain_problem

_SCHEMA = json.loads(Path("reconciler/schemas/config.schema.json").read_text())
CLUSTER = re.compile(_SCHEMA["properties"]["cluster"]["pattern"])


@given(st.from_regex(CLUSTER, fullmatch=True))
def test_every_name_the_schema_accepts_makes_valid_lease_names(cluster: str) -> None:
    names = (
        apply_lease_name(cluster),
        leader_lease_name("plan", cluster),
        leader_lease_name("apply", cluster),
    )
    for name in names:
        assert subdomain_problem(name) is None, (cluster, name)


def test_names_already_valid_are_kept() -> None:
    assert apply_lease_name("prod-eks") == "asg-reconciler-apply-prod-eks"
    assert leader_lease_name("plan", "prod.eks-1") == "asg-reconciler-plan-leader-prod.eks-1"


def test_other_names_are_derived_and_kept_apart() -> None:
    derived = kube_cluster_name("Prod_EKS")
    assert re.fullmatch(r"prod-eks-[0-9a-f]{8}", derived)
    assert derived == kube_cluster_name("Prod_EKS")  # the same in every process
    assert len({kube_cluster_name(c) for c in ("Prod_EKS", "prod_eks", "PROD-EKS", "prod-eks")}) == 4
    assert kube_cluster_name("prod-") != "prod-" and kube_cluster_name("_") != ""
