"""The shipped RBAC (examples/kubernetes/overlays/split) on a real API server with RBAC on: plan and
apply, each as its own ServiceAccount with a token from the TokenRequest API, go through a whole
reviewed scale-down (plan reads and proposes, apply takes its Lease, marks the node, evicts under
the real budget, writes Events) with no 403; and each is refused what it must not do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from reconciler.gitops.manifest import parse_manifest
from tests.support.git import git
from tests.support.real_cluster import RealCluster, new_api_client
from tests.support.real_world import SHIPPED_CLUSTER, RealWorld, under_used_node_under_a_pdb

pytestmark = pytest.mark.xdist_group("realcluster")  # one control plane, one worker (conftest.py)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubernetes"
NAMESPACE = "asg-reconciler"
CLUSTER = SHIPPED_CLUSTER  # the name the shipped Roles' resourceNames are written for
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
# Shipped beside the RBAC so that no Role needs `create` in the release namespace (issue 28): the
# leader Leases and the status and control ConfigMaps, which the stages only update.
SHIPPED_STATE_KINDS = ("Lease", "ConfigMap")
ACCOUNTS = {f"system:serviceaccount:{NAMESPACE}:asg-reconciler-{stage}" for stage in ("plan", "apply")}


def shipped_rbac(cluster: RealCluster) -> list[dict[str, Any]]:
    """The split overlay's identities, RBAC and the objects it ships for the stages to update (leader
    Leases, status and control ConfigMaps), rendered by the real kubectl, as shipped (their
    `app.kubernetes.io/name: asg-reconciler` label, or their name, is what the reset removes)."""
    rendered = [
        o for o in yaml.safe_load_all(cluster.kubectl("kustomize", str(EXAMPLES / "overlays" / "split"))) if o
    ]
    objects = [o for o in rendered if o["kind"] in RBAC_KINDS + SHIPPED_STATE_KINDS]
    assert {o["kind"] for o in objects} == set(RBAC_KINDS + SHIPPED_STATE_KINDS)
    return sorted(objects, key=lambda o: o["kind"] not in ("Namespace",))  # the namespace first


def forbidden(call: Any) -> bool:
    try:
        call()
    except ApiException as exc:
        if exc.status == 403:
            return True
        raise AssertionError(f"expected 403, got {exc.status}: {exc.body}") from exc
    return False


def test_each_stage_as_its_own_service_account_no_403_and_refused_the_rest(
    eks_world: RealWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world, cluster = eks_world, eks_world.cluster
    audited = len(cluster.plane.audit())  # the log is the session's: this test's part starts here
    cluster.apply(*shipped_rbac(cluster))
    run_keys = f"run: {{namespace: {NAMESPACE}}}\n"
    plan_kubeconfig = cluster.kubeconfig_as(world.tmp / "plan.kubeconfig", NAMESPACE, "asg-reconciler-plan")
    apply_kubeconfig = cluster.kubeconfig_as(
        world.tmp / "apply.kubeconfig", NAMESPACE, "asg-reconciler-apply"
    )
    plan_config = world.write_config(plan_kubeconfig, name="plan.yaml", extra=run_keys)
    apply_config = world.write_config(apply_kubeconfig, name="apply.yaml", extra=run_keys)
    busy, idle, idle_instance = under_used_node_under_a_pdb(world)

    planned = world.cli(capsys, "plan", config=plan_config)
    assert planned.code == 0, planned.out + planned.err
    proposal = parse_manifest(
        git("show", f"{world.proposal}:{world.main_path}", cwd=world.remote), world.proposal
    )
    assert proposal.group("general").removal_ids == (idle_instance,), planned.out  # type: ignore[union-attr]
    assert world.cli(capsys, "approve", "scale-down", config=plan_config).code == 0
    applied = world.cli(capsys, "apply", config=apply_config)
    assert applied.code == 0, applied.out + applied.err
    for said in (planned, applied):
        text = (said.out + said.err).lower()
        assert "403" not in text and "forbidden" not in text, said.out + said.err
    assert world.desired("general") == 1 and idle_instance not in world.in_service("general")
    # the API server's own record: every request either account made in the story, none refused
    story = [
        e
        for e in cluster.plane.audit(audited)
        if e.get("stage") == "ResponseComplete" and e["user"]["username"] in ACCOUNTS
    ]
    refused = [f"{e['verb']} {e['requestURI']}" for e in story if e["responseStatus"]["code"] == 403]
    assert not refused, refused
    made = {(e["user"]["username"].rsplit(":", 1)[-1], e["verb"], e["objectRef"]["resource"]) for e in story}
    assert ("asg-reconciler-apply", "create", "leases") in made  # apply took its Lease as itself
    assert ("asg-reconciler-apply", "patch", "nodes") in made  # marked the node
    assert ("asg-reconciler-apply", "create", "pods") in made  # pods/eviction
    assert ("asg-reconciler-plan", "list", "pods") in made

    # what each stage must not do, tried for real: 403 from the API server
    plan_api = new_api_client(plan_kubeconfig)
    apply_api = new_api_client(apply_kubeconfig)
    try:
        plan_core, apply_core = client.CoreV1Api(plan_api), client.CoreV1Api(apply_api)
        plan_leases = client.CoordinationV1Api(plan_api)
        web = next(p for p in cluster.pods("shop") if p.metadata.name.startswith("web-"))
        eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=web.metadata.name, namespace="shop"))
        assert forbidden(
            lambda: plan_core.create_namespaced_pod_eviction(web.metadata.name, "shop", eviction)
        )
        assert forbidden(lambda: plan_core.patch_node(busy, {"spec": {"unschedulable": True}}))
        assert forbidden(lambda: plan_core.delete_namespaced_pod(web.metadata.name, "shop"))
        assert forbidden(
            lambda: plan_leases.patch_namespaced_lease(
                f"asg-reconciler-apply-{CLUSTER}", "kube-system", {"spec": {"holderIdentity": "plan"}}
            )
        )
        assert forbidden(
            lambda: plan_leases.create_namespaced_lease(
                "kube-system",
                client.V1Lease(metadata=client.V1ObjectMeta(name=f"asg-reconciler-apply-{CLUSTER}")),
            )
        )
        assert forbidden(
            lambda: plan_leases.patch_namespaced_lease(
                f"asg-reconciler-apply-leader-{CLUSTER}", NAMESPACE, {"spec": {"holderIdentity": "plan"}}
            )
        )
        # apply drains, but deletes nothing, creates no pod, and cannot lift the kill switch
        assert forbidden(lambda: apply_core.delete_node(busy))
        assert forbidden(lambda: apply_core.delete_namespaced_pod(web.metadata.name, "shop"))
        assert forbidden(
            lambda: apply_core.patch_namespaced_config_map(
                "asg-reconciler-control", NAMESPACE, {"data": {"suspend": "false"}}
            )
        )
        assert forbidden(lambda: apply_core.list_secret_for_all_namespaces())
    finally:
        plan_api.close()
        apply_api.close()
    assert idle not in {n.metadata.name for n in cluster.nodes()} or world.wait_nodes("general", 1)
