"""examples/kubernetes/: every overlay renders, validates against Kubernetes' OpenAPI schemas, and keeps
the settings docs/deploy-kubernetes.md promises (security, probes, grace periods, configs that load)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from reconciler.config.settings import Config, config_from_document
from reconciler.domain.lease_names import apply_lease_name, kube_cluster_name, leader_lease_name
from tests.examples.kustomize import EXAMPLES, OVERLAYS, find, needs_kubectl, overlay, render

pytestmark = needs_kubectl

# A supported Kubernetes version whose schemas kubernetes-validate ships (offline).
KUBERNETES_VERSION = "1.32"
IMAGE = "ghcr.io/asg-reconciler/asg-reconciler:0.1.0"
NAMESPACE = "asg-reconciler"
# Prometheus operator kinds: no schema in kubernetes-validate, so shape-checked below instead.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}


def with_monitoring(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The overlay with components/monitoring added before base, as the docs say to."""
    source = yaml.safe_load((EXAMPLES / "overlays" / name / "kustomization.yaml").read_text())
    if source.get("resources"):
        pytest.skip("a CronJob exports no metrics: monitoring is for the run overlays")

    def relative(path: Path) -> str:  # kustomize refuses absolute component paths
        return os.path.relpath(path.resolve(), tmp_path)

    components = [relative(EXAMPLES / "overlays" / name / c) for c in source["components"]]
    components.insert(-1, relative(EXAMPLES / "components" / "monitoring"))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({"components": components}))
    return render(tmp_path)


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, pod template metadata, pod spec) of every Deployment and CronJob."""
    found = []
    for o in objects:
        if o["kind"] == "Deployment":
            template = o["spec"]["template"]
        elif o["kind"] == "CronJob":
            template = o["spec"]["jobTemplate"]["spec"]["template"]
        else:
            continue
        found.append((o["metadata"]["name"], template["metadata"], template["spec"]))
    return found


def configs(objects: list[dict[str, Any]]) -> dict[str, Config]:
    """Each config ConfigMap's config.yaml, loaded as `run` loads it, by ConfigMap name (hash cut)."""
    return {
        cm["metadata"]["name"].rsplit("-", 1)[0]: config_from_document(
            yaml.safe_load(cm["data"]["config.yaml"]), cm["metadata"]["name"]
        )
        for cm in find(objects, "ConfigMap")
        if "config.yaml" in cm.get("data", {})
    }


def config_of(objects: list[dict[str, Any]], spec: dict[str, Any]) -> Config:
    """The config a pod spec mounts at /etc/asg-reconciler."""
    volume = next(v for v in spec["volumes"] if v["name"] == "config")
    if "configMap" in volume:
        name = volume["configMap"]["name"]
    else:
        name = next(s["configMap"]["name"] for s in volume["projected"]["sources"] if "configMap" in s)
    loaded = configs(objects)
    return loaded[name.rsplit("-", 1)[0]]


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_object_validates_against_the_kubernetes_schemas(name: str) -> None:
    objects = overlay(name)
    assert objects
    for obj in objects:
        assert (obj["apiVersion"], obj["kind"]) not in CRD_KINDS, (
            "CRD objects belong in components/monitoring"
        )
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert namespace in (NAMESPACE, "kube-system", "default"), obj["metadata"]


@pytest.mark.parametrize("name", ["split", "all-in-one", "shadow"])
def test_monitoring_objects_have_the_operator_shape(name: str, tmp_path: Path) -> None:
    """kubernetes-validate has no schemas for CRDs: check apiVersion, kind and the fields the
    operator needs, and that every alert names only metrics docs/metrics.md documents."""
    objects = with_monitoring(name, tmp_path)
    monitors = find(objects, "ServiceMonitor")
    rules = find(objects, "PrometheusRule")
    assert len(monitors) == len(rules) == 1
    assert all(o["apiVersion"] == "monitoring.coreos.com/v1" for o in monitors + rules)
    (monitor,) = monitors
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = find(objects, "Service")
    assert services and all(selector.items() <= s["metadata"]["labels"].items() for s in services)
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
    assert all(p["name"] == "metrics" for s in services for p in s["spec"]["ports"])

    documented = (Path(EXAMPLES).parents[1] / "docs" / "metrics.md").read_text()
    alerts = {r["alert"]: r["expr"] for g in rules[0]["spec"]["groups"] for r in g["rules"]}
    for expr in alerts.values():
        for word in expr.replace("(", " ").replace("{", " ").replace(")", " ").split():
            if word.startswith("asg_reconciler_"):
                assert f"`{word}`" in documented, f"{word} is not in docs/metrics.md"
    joined = "\n".join(alerts.values())
    for wanted in (
        'asg_reconciler_errors_total{stage="apply",kind!="suspended"}',
        "asg_reconciler_node_group_drift_nodes != 0",
        "asg_reconciler_node_group_backoff",
        "asg_reconciler_oldest_open_proposal_age_seconds) > 86400",
        'asg_reconciler_last_success_timestamp_seconds{stage="plan"}) > 600',
        "max by (stage) (asg_reconciler_leader) == 0",
    ):
        assert wanted in joined


@pytest.mark.parametrize("name", OVERLAYS)
def test_pods_run_locked_down(name: str) -> None:
    objects = overlay(name)
    workloads = pod_specs(objects)
    assert workloads
    for workload, metadata, spec in workloads:
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == 65532, workload
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, workload
        assert spec["priorityClassName"] == "system-cluster-critical", workload
        assert metadata["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
        (container,) = spec["containers"]
        assert container["image"] == IMAGE, workload
        locked = container["securityContext"]
        assert locked["allowPrivilegeEscalation"] is False, workload
        assert locked["readOnlyRootFilesystem"] is True, workload
        assert locked["capabilities"] == {"drop": ["ALL"]}, workload
        resources = container["resources"]
        assert resources["requests"] == {"cpu": "500m", "memory": "1Gi"} or "apply" in workload
        assert resources["requests"]["memory"] and resources["limits"]["memory"] == "2Gi", workload
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/etc/asg-reconciler"]["readOnly"] is True
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]], workload
        env = {e["name"]: e for e in container["env"]}
        cache = env["XDG_CACHE_HOME"]["value"]
        assert "emptyDir" in volumes[mounts[cache]["name"]], workload
        config = config_of(objects, spec)
        assert container["args"][-2:] == ["--config", "/etc/asg-reconciler/config.yaml"]
        assert container["command"] == ["asg-reconciler"]
        assert config.git.token_env in env and "secretKeyRef" in env[config.git.token_env]["valueFrom"]
        if config.forge.type == "github":
            assert "secretKeyRef" in env[config.forge.token_env]["valueFrom"]
        assert not {n for n in env if n.startswith("AWS_") and ("KEY" in n or "SECRET" in n)}
        assert config.run.namespace == NAMESPACE  # the pod's own, said explicitly
        sa = find(objects, "ServiceAccount", spec["serviceAccountName"])[0]
        assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


@pytest.mark.parametrize("name", ["split", "all-in-one", "shadow"])
def test_deployments_have_probes_replicas_and_a_budget(name: str) -> None:
    objects = overlay(name)
    deployments = find(objects, "Deployment")
    assert len(deployments) == (2 if name == "split" else 1)
    budgets = find(objects, "PodDisruptionBudget")
    for deployment in deployments:
        spec = deployment["spec"]
        assert spec["replicas"] == 2  # leader election keeps one active
        (container,) = spec["template"]["spec"]["containers"]
        assert container["ports"] == [{"name": "metrics", "containerPort": 8085}]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        labels = spec["template"]["metadata"]["labels"]
        assert [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        config = config_of(objects, spec["template"]["spec"])
        assert config.run.metrics_address == ":8085"


@pytest.mark.parametrize("name", ["split", "all-in-one"])
def test_a_drain_in_progress_can_finish_before_the_pod_is_killed(name: str) -> None:
    """docs/operations.md "Stopping": terminationGracePeriodSeconds and run.shutdownGracePeriod are
    equal and above apply.drainTimeout + 20s."""
    objects = overlay(name)
    applying = 0
    for deployment in find(objects, "Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        config = config_of(objects, spec)
        grace = spec["terminationGracePeriodSeconds"]
        assert grace == config.run.shutdown_grace_period.total_seconds()
        if "apply" in config.run.stages:
            applying += 1
            assert grace > config.apply.drain_timeout.total_seconds() + 20
            assert config.apply.drain_timeout > config.apply.max_grace_period
            sources = {
                item["path"]: item
                for source in next(v for v in spec["volumes"] if v["name"] == "config")["projected"][
                    "sources"
                ]
                for item in source.get("secret", {}).get("items", [])
            }
            assert set(sources) == {"allowed_signers", "record-key"}
            assert config.approval.allowed_signers == "/etc/asg-reconciler/allowed_signers"
            assert config.apply.signing_key == "/etc/asg-reconciler/record-key"
    assert applying == 1


def test_only_apply_pods_see_the_signing_secrets() -> None:
    objects = overlay("split")
    for deployment in find(objects, "Deployment"):
        volumes = yaml.safe_dump(deployment["spec"]["template"]["spec"]["volumes"])
        holds = "asg-reconciler-record-key" in volumes
        assert holds == (deployment["metadata"]["name"] == "asg-reconciler-apply")
    for cronjob in find(overlay("cronjob"), "CronJob"):
        assert "asg-reconciler-record-key" not in yaml.safe_dump(cronjob)


@pytest.mark.parametrize("name", OVERLAYS)
def test_each_config_loads_and_names_the_stages_of_its_overlay(name: str) -> None:
    objects = overlay(name)
    loaded = configs(objects)
    stages = {n: c.run.stages for n, c in loaded.items()}
    expected = {
        "split": {"asg-reconciler-plan-config": ("plan",), "asg-reconciler-apply-config": ("apply",)},
        "all-in-one": {"asg-reconciler-plan-config": ("plan", "apply")},
        "shadow": {"asg-reconciler-plan-config": ("plan",)},
        "cronjob": {"asg-reconciler-plan-config": ("plan",)},
    }[name]
    assert stages == expected
    if name == "shadow":
        assert loaded["asg-reconciler-plan-config"].forge.type == "none"
    # every stage of one deployment plans and applies the same cluster, groups and repository
    shared = {
        (c.cluster, c.region, c.node_groups, c.git.url, c.git.branch, c.git.path) for c in loaded.values()
    }
    assert len(shared) == 1


@pytest.mark.parametrize("name", OVERLAYS)
def test_lease_names_in_the_roles_follow_the_cluster_in_the_config(name: str) -> None:
    """The Roles name Leases by cluster (asg-reconciler-<stage>-leader-<cluster>,
    asg-reconciler-apply-<cluster>): a config for another cluster must come with Roles for it."""
    objects = overlay(name)
    (cluster,) = {c.cluster for c in configs(objects).values()}
    for role in find(objects, "Role"):
        for rule in role["rules"]:
            for resource_name in rule.get("resourceNames", []):
                if resource_name.startswith("asg-reconciler-") and "leases" in rule["resources"]:
                    assert resource_name.endswith(f"-{kube_cluster_name(cluster)}"), (
                        role["metadata"]["name"],
                        resource_name,
                    )


@pytest.mark.parametrize("name", OVERLAYS)
def test_no_identity_may_create_a_configmap(name: str) -> None:
    """Found by review (issue 28): the plan Role could `create` any ConfigMap in its namespace (RBAC
    cannot limit create by name), so the plan identity could create `asg-reconciler-control`, the
    kill switch, with its own content before anyone suspended. Both ConfigMaps are shipped; no Role
    or ClusterRole of any overlay grants create on ConfigMaps."""
    objects = overlay(name)
    for role in find(objects, "Role") + find(objects, "ClusterRole"):
        for rule in role["rules"]:
            if "configmaps" in rule["resources"] and "" in rule["apiGroups"]:
                assert "create" not in rule["verbs"], (role["metadata"]["name"], rule)
                assert rule.get("resourceNames"), (role["metadata"]["name"], "ConfigMaps only by name")


@pytest.mark.parametrize("name", OVERLAYS)
def test_no_identity_may_create_a_lease_in_the_release_namespace(name: str) -> None:
    """The leader Leases are shipped too: with `create` on Leases there, the plan identity could take
    the name of apply's leader Lease before apply first started. (Apply's own Lease in kube-system
    is still created by apply, docs/deploy-kubernetes.md.)"""
    objects = overlay(name)
    for role in find(objects, "Role"):
        if role["metadata"]["namespace"] != NAMESPACE:
            continue
        for rule in role["rules"]:
            if "leases" in rule["resources"]:
                assert "create" not in rule["verbs"], (role["metadata"]["name"], rule)
    granted = {
        n
        for role in find(objects, "Role")
        if role["metadata"]["namespace"] == NAMESPACE
        for rule in role["rules"]
        if "leases" in rule["resources"]
        for n in rule.get("resourceNames", [])
    }
    shipped = {lease["metadata"]["name"] for lease in find(objects, "Lease")}
    assert shipped == granted  # every Lease a stage elects on is there, and no other
    for lease in find(objects, "Lease"):
        assert lease["metadata"]["namespace"] == NAMESPACE and not lease.get("spec"), lease


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_kill_switch_and_the_status_configmap_are_shipped_empty(name: str) -> None:
    """They exist from the first deploy, in run.namespace, with no `data:`: `kubectl apply` of the
    kustomization again never drops the keys the stages and `suspend` wrote (it would resume a
    suspended cluster)."""
    objects = overlay(name)
    for configmap in ("asg-reconciler-control", "asg-reconciler-status"):
        (shipped,) = find(objects, "ConfigMap", configmap)
        assert shipped["metadata"]["namespace"] == NAMESPACE
        assert "data" not in shipped and "binaryData" not in shipped, configmap
    assert not find(objects, "ConfigMap", "asg-reconciler-cluster")  # local-config: never applied


def test_the_roles_follow_the_cluster_named_once(tmp_path: Path) -> None:
    """Found by review (issue 28): the Roles' resourceNames hard-coded `prod-eks`, so a config for
    another cluster met 403s on its Leases. The name is set once, in base/cluster.yaml, and every
    Lease name of every Role follows it."""
    import shutil

    copy = tmp_path / "kubernetes"
    shutil.copytree(EXAMPLES, copy)
    source = copy / "base" / "cluster.yaml"
    source.write_text(source.read_text().replace("cluster: prod-eks", "cluster: staging-eu-1"))
    for name in OVERLAYS:
        objects = render(copy / "overlays" / name)
        leases = [
            resource_name
            for role in find(objects, "Role")
            for rule in role["rules"]
            if "leases" in rule["resources"]
            for resource_name in rule.get("resourceNames", [])
            if resource_name.startswith("asg-reconciler-")
        ]
        assert all(n.endswith("-staging-eu-1") for n in leases), (name, leases)
        roles = yaml.safe_dump(find(objects, "Role") + find(objects, "ClusterRole") + find(objects, "Lease"))
        assert "prod-eks" not in roles and "CLUSTER" not in roles, name
        assert all(lease["metadata"]["name"].endswith("-staging-eu-1") for lease in find(objects, "Lease"))
    split = {
        n
        for role in find(render(copy / "overlays" / "split"), "Role")
        for r in role["rules"]
        for n in r.get("resourceNames", [])
    }
    assert {
        "asg-reconciler-plan-leader-staging-eu-1",
        "asg-reconciler-apply-leader-staging-eu-1",
        "asg-reconciler-apply-staging-eu-1",
    } <= split


@pytest.mark.parametrize("name", OVERLAYS)
def test_base_names_the_cluster_every_config_plans(name: str) -> None:
    """base/cluster.yaml and the configs' `cluster:` must agree (the Roles follow the former, the
    Lease names the code uses the latter, as Kubernetes names carry it: the same for `prod-eks`)."""
    named = yaml.safe_load((EXAMPLES / "base" / "cluster.yaml").read_text())["data"]["cluster"]
    assert {kube_cluster_name(c.cluster) for c in configs(overlay(name)).values()} == {named}


def test_a_cluster_name_eks_allows_gets_roles_for_the_leases_the_code_takes(tmp_path: Path) -> None:
    """`Prod_EKS` is an EKS name but no Kubernetes name: the code's Leases carry its derived form
    (reconciler/domain/lease_names.py), which `validate` prints and base/cluster.yaml holds; the
    rendered Roles and shipped Leases then name exactly the Leases plan and apply take."""
    import shutil

    copy = tmp_path / "kubernetes"
    shutil.copytree(EXAMPLES, copy)
    derived = kube_cluster_name("Prod_EKS")
    source = copy / "base" / "cluster.yaml"
    source.write_text(source.read_text().replace("cluster: prod-eks", f"cluster: {derived}"))
    objects = render(copy / "overlays" / "split")
    granted = {
        n
        for role in find(objects, "Role")
        for r in role["rules"]
        if "leases" in r["resources"]
        for n in r.get("resourceNames", [])
        if n.startswith("asg-reconciler-")
    }
    taken = {apply_lease_name("Prod_EKS"), leader_lease_name("plan", "Prod_EKS")}
    taken.add(leader_lease_name("apply", "Prod_EKS"))
    assert granted == taken
    assert {lease["metadata"]["name"] for lease in find(objects, "Lease")} <= taken
